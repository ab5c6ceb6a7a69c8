//! One service: the server trait, the dispatcher (`<S>Server<T>`, a `Handler` of the server
//! skeleton), the method numbers (`<S>Method`), the client (`<S>Client<D>`) and the replies of
//! its open-loop interface (`<S>Reply<'a>`), and a request to any of its methods
//! (`<S>Call<'a>`). The runtime they use is `cornflakes-rpc`
//! (docs/codegen.md, "Services").

use std::collections::{BTreeMap, HashSet};

use proc_macro2::{Literal, TokenStream};
use quote::{format_ident, quote};

use super::message::view_name;
use super::names::{self, doc_attrs, ident, ident_avoiding, message_path, snake, upper_camel};
use crate::error::{Error, Warning};
use crate::schema::{MethodDef, MsgId, Place, Schema, ServiceId};
use crate::Config;

/// A unary method to generate, with its number.
struct Method<'s> {
    def: &'s MethodDef,
    id: u16,
    exactly_once: bool,
    /// The method's snake_case name (`get_m`).
    fn_name: proc_macro2::Ident,
    /// Its UpperCamel name, for enum variants.
    variant: proc_macro2::Ident,
}

/// The numbers of `service`'s methods, in declaration order: pinned by `Config::method_id`,
/// else by `option (cornflakes.method_id)`, else the method's position from 1. Two methods
/// of one number are an error naming both.
pub(crate) fn method_numbers(
    schema: &Schema,
    service: ServiceId,
    config: &Config,
) -> Result<Vec<u16>, Error> {
    let s = &schema.services[service];
    let place = |loc| Place {
        file: schema.files[s.file].path.clone(),
        loc,
    };
    let mut numbers = Vec::with_capacity(s.methods.len());
    let mut by_number: BTreeMap<u16, &str> = BTreeMap::new();
    for (i, m) in s.methods.iter().enumerate() {
        let pinned = config
            .method_ids
            .iter()
            .rev()
            .find(|(name, _)| name.trim_start_matches('.') == m.full_name)
            .map(|&(_, n)| n)
            .or(m.pinned_id);
        let n = match pinned {
            Some(n) => n,
            None => u16::try_from(i + 1).map_err(|_| {
                Error::invalid(
                    place(m.loc),
                    format!(
                        "method `{}` is number {} of its service: method numbers are 1 to 65535; pin it with `option (cornflakes.method_id)`",
                        m.full_name,
                        i + 1
                    ),
                )
            })?,
        };
        if n == 0 {
            return Err(Error::invalid(
                place(m.loc),
                format!(
                    "method `{}`: number 0 is the error reply's message type; method numbers are 1 to 65535",
                    m.full_name
                ),
            ));
        }
        if let Some(other) = by_number.insert(n, &m.full_name) {
            return Err(Error::invalid(
                place(m.loc),
                format!(
                    "methods `{other}` and `{}` both have number {n}: a method's number is the framing header's message type of its requests, so each method of a service needs its own (pin one with `option (cornflakes.method_id) = N;` or `Config::method_id`)",
                    m.full_name
                ),
            ));
        }
        numbers.push(n);
    }
    Ok(numbers)
}

/// Where service `service`'s items are, from the root of the module tree its package's file
/// is included in: `a.b.Svc` → `a::b::Svc` (the trait; the dispatcher, the client and the
/// method numbers are that path with `Server`, `Client` and `Method` appended).
pub(crate) fn rust_path(schema: &Schema, service: ServiceId) -> String {
    let s = &schema.services[service];
    let mut path = names::package_modules(&s.package);
    path.push(upper_camel(&s.name));
    path.join("::")
}

/// The code of service `service`, in the module of its package; `reply_views` holds the reply
/// messages whose `ReplyView` impl was generated already (one per message in a generation).
pub(crate) fn generate(
    schema: &Schema,
    service: ServiceId,
    config: &Config,
    warnings: &mut Vec<Warning>,
    reply_views: &mut HashSet<MsgId>,
) -> Result<TokenStream, Error> {
    let s = &schema.services[service];
    let numbers = method_numbers(schema, service, config)?;
    let place = |loc| Place {
        file: schema.files[s.file].path.clone(),
        loc,
    };
    let mut methods = Vec::new();
    for (m, &id) in s.methods.iter().zip(&numbers) {
        if m.is_streaming() {
            let what = format!(
                "streaming rpc `{}` ({}): only unary rpcs are generated",
                m.full_name,
                match (m.client_streaming, m.server_streaming) {
                    (true, true) => "streams both ways",
                    (true, false) => "streams its requests",
                    _ => "streams its replies",
                }
            );
            if config.refuse_streaming {
                return Err(Error::unsupported(
                    place(m.loc),
                    format!("{what} (Config::refuse_streaming is on)"),
                ));
            }
            warnings.push(Warning::new(place(m.loc), format!("{what}; skipped")));
            continue;
        }
        let exactly_once = m.exactly_once
            || config
                .exactly_once
                .iter()
                .any(|n| n.trim_start_matches('.') == m.full_name);
        let fn_base = snake(&m.name);
        methods.push(Method {
            def: m,
            id,
            exactly_once,
            fn_name: ident_avoiding(&fn_base, &[]),
            variant: ident(&upper_camel(&m.name)),
        });
    }
    let gen = ServiceGen {
        schema,
        module: names::package_modules(&s.package),
        name: upper_camel(&s.name),
        full_name: &s.full_name,
        doc: &s.doc,
        methods,
    };
    let views = gen.reply_views(reply_views);
    let (tr, method_enum, server, client, replies, requests) = (
        gen.server_trait(),
        gen.method_enum(),
        gen.server(),
        gen.client(),
        gen.reply_enum(),
        gen.request_enum(),
    );
    Ok(quote! { #tr #method_enum #server #replies #requests #client #views })
}

struct ServiceGen<'s> {
    schema: &'s Schema,
    /// The package's module path (where the service's items live).
    module: Vec<String>,
    /// The service's Rust name (UpperCamel).
    name: String,
    full_name: &'s str,
    doc: &'s str,
    methods: Vec<Method<'s>>,
}

impl ServiceGen<'_> {
    fn item(&self, suffix: &str) -> proc_macro2::Ident {
        format_ident!("{}{}", self.name, suffix)
    }

    fn message(&self, id: MsgId) -> TokenStream {
        message_path(self.schema, &self.module, id)
    }

    fn view(&self, id: MsgId) -> TokenStream {
        let m = &self.schema.messages[id];
        // Through an extern path when the type is generated elsewhere (`cornflakes-types`).
        names::item_path(
            self.schema,
            &self.module,
            &m.package,
            &m.parents,
            &view_name(&m.name),
        )
    }

    fn number(&self, m: &Method<'_>) -> Literal {
        Literal::u16_unsuffixed(m.id)
    }

    /// A line naming the method's number and its proto name, for docs.
    fn method_doc(&self, m: &Method<'_>) -> String {
        let input = &self.schema.messages[m.def.input].full_name;
        let output = &self.schema.messages[m.def.output].full_name;
        let once = if m.exactly_once {
            "; run exactly once per request however often it is retried"
        } else {
            ""
        };
        format!(
            " `rpc {}({input}) returns ({output})`: method {} (the framing header's message type){once}.",
            m.def.name, m.id
        )
    }

    fn server_trait(&self) -> TokenStream {
        let name = ident(&self.name);
        let proto_doc = doc_attrs(self.doc);
        let server = self.item("Server");
        let doc = format!(
            " The server side of service `{}`: one method per unary rpc, called by [`{server}`] \
             with the request read in place (only what the method reads is checked) and the \
             handle its reply is built in and sent through. The reply may borrow the request \
             and the service (values it holds in pinned memory go out by reference) for the \
             call, `'r`.",
            self.full_name
        );
        let methods = self.methods.iter().map(|m| {
            let f = &m.fn_name;
            let req = self.view(m.def.input);
            let reply = self.message(m.def.output);
            let proto_doc = doc_attrs(&m.def.doc);
            let number = self.method_doc(m);
            // An exactly-once method's reply is kept as its request's outcome: a handle type
            // of its own, so other methods' reply paths carry no exactly-once code.
            let handle = if m.exactly_once {
                quote!(cf_rpc::Reply<'r, D, #reply<'r>, cf_rpc::Kept<'r>>)
            } else {
                quote!(cf_rpc::Reply<'r, D, #reply<'r>>)
            };
            quote! {
                #proto_doc
                #[doc = ""]
                #[doc = #number]
                fn #f<'r, D: cf::Datapath>(
                    &'r mut self,
                    req: #req<'r>,
                    reply: #handle,
                ) -> ::core::result::Result<cf_rpc::Replied, cf_rpc::Unanswered>;
            }
        });
        quote! {
            #proto_doc
            #[doc = ""]
            #[doc = #doc]
            pub trait #name {
                #(#methods)*
            }
        }
    }

    fn method_enum(&self) -> TokenStream {
        let e = self.item("Method");
        let doc = format!(
            " The methods of service `{}` and their numbers (the framing header's message type \
             of a method's requests and replies).",
            self.full_name
        );
        let variants = self.methods.iter().map(|m| {
            let v = &m.variant;
            let n = self.number(m);
            let d = format!(" `{}`.", m.def.full_name);
            quote!(#[doc = #d] #v = #n,)
        });
        let all = self.methods.iter().map(|m| {
            let v = &m.variant;
            quote!(#e::#v)
        });
        let count = Literal::usize_unsuffixed(self.methods.len());
        let from_id = self.methods.iter().map(|m| {
            let (v, n) = (&m.variant, self.number(m));
            quote!(#n => ::core::option::Option::Some(#e::#v),)
        });
        let names = self.methods.iter().map(|m| {
            let (v, n) = (&m.variant, &m.def.full_name);
            quote!(#e::#v => #n,)
        });
        let once = self.methods.iter().map(|m| {
            let (v, o) = (&m.variant, m.exactly_once);
            quote!(#e::#v => #o,)
        });
        // An enum without variants cannot be matched on `self`.
        let (name_body, once_body) = if self.methods.is_empty() {
            (quote!(match self {}), quote!(match self {}))
        } else {
            (
                quote!(match self { #(#names)* }),
                quote!(match self { #(#once)* }),
            )
        };
        quote! {
            #[doc = #doc]
            #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
            #[allow(dead_code)]
            pub enum #e {
                #(#variants)*
            }

            #[allow(dead_code)]
            impl #e {
                /// Every method, in declaration order.
                pub const ALL: [#e; #count] = [#(#all),*];

                /// The method's number.
                pub const fn id(self) -> u16 {
                    self as u16
                }

                /// The method numbered `id`, if any.
                // A service whose every rpc streams has only the `_` arm.
                #[allow(clippy::match_single_binding)]
                pub const fn from_id(id: u16) -> ::core::option::Option<#e> {
                    match id {
                        #(#from_id)*
                        _ => ::core::option::Option::None,
                    }
                }

                /// The method's full name (`package.Service.Method`).
                pub const fn name(self) -> &'static str {
                    #name_body
                }

                /// Whether the method runs exactly once per request under retries.
                pub const fn exactly_once(self) -> bool {
                    #once_body
                }
            }
        }
    }

    fn server(&self) -> TokenStream {
        let tr = ident(&self.name);
        let server = self.item("Server");
        let full = self.full_name;
        let doc = format!(
            " Serves service `{full}` with a [`{tr}`]: routes each request to the method its \
             message type names (one `match`), answers a type no method has with an error reply \
             (counted), and refuses a request that does not open (counted by the server). A \
             [`cf_rpc::Handler`] of the server skeleton."
        );
        // A service without unary methods answers every request with the error reply.
        let unused = if self.methods.is_empty() {
            quote!(let _ = service;)
        } else {
            quote!()
        };
        let arms = self.methods.iter().map(|m| {
            let (f, n) = (&m.fn_name, self.number(m));
            let view = self.view(m.def.input);
            if m.exactly_once {
                // Through the exactly-once table: a retry is answered from it, not run.
                return quote! {
                    #n => {
                        let req = #view::open(m.data.as_slice())?;
                        match rt.once(dp, m)? {
                            ::core::option::Option::Some(fresh) => {
                                service.#f(req, rt.reply_once(dp, m, fresh)).map(drop)
                            }
                            ::core::option::Option::None => ::core::result::Result::Ok(()),
                        }
                    }
                };
            }
            quote! {
                #n => {
                    let req = #view::open(m.data.as_slice())?;
                    service.#f(req, rt.reply(dp, m)).map(drop)
                }
            }
        });
        quote! {
            #[doc = #doc]
            #[allow(dead_code)]
            pub struct #server<T> {
                service: T,
                rt: cf_rpc::Dispatcher,
            }

            #[allow(dead_code)]
            impl<T: #tr> #server<T> {
                /// The service's full name.
                pub const SERVICE: &'static str = #full;

                /// Serves `service`, replies built and sent as `rt` says.
                pub fn new(service: T, rt: cf_rpc::Dispatcher) -> Self {
                    #server { service, rt }
                }

                /// The service.
                pub fn service(&self) -> &T {
                    &self.service
                }

                /// The service, mutably.
                pub fn service_mut(&mut self) -> &mut T {
                    &mut self.service
                }

                /// The dispatcher's state (arena, send path, counters).
                pub fn dispatcher(&self) -> &cf_rpc::Dispatcher {
                    &self.rt
                }

                /// The service, given back.
                pub fn into_inner(self) -> T {
                    self.service
                }

                /// Answers request `m` received on `dp`.
                #[inline]
                pub fn dispatch<D: cf::Datapath>(
                    &mut self,
                    dp: &mut D,
                    m: &cf::RxMsg,
                ) -> ::core::result::Result<(), cf_rpc::Unanswered> {
                    Self::dispatch_to(&mut self.service, &mut self.rt, dp, m)
                }

                /// Answers request `m` received on `dp` with `service`, replies built and sent
                /// as `rt` says (for a handler that keeps the service itself).
                #[inline]
                #[allow(clippy::match_single_binding)]
                pub fn dispatch_to<D: cf::Datapath>(
                    service: &mut T,
                    rt: &mut cf_rpc::Dispatcher,
                    dp: &mut D,
                    m: &cf::RxMsg,
                ) -> ::core::result::Result<(), cf_rpc::Unanswered> {
                    #unused
                    match m.msg.ty {
                        #(#arms)*
                        _ => rt.unknown_method(dp, m),
                    }
                }
            }

            impl<T: #tr> cf_rpc::Handler for #server<T> {
                type Counters = cf_rpc::RpcCounters;

                fn label(&self) -> ::std::string::String {
                    ::std::string::String::from(#full)
                }

                fn handle<D: cf::Datapath>(
                    &mut self,
                    dp: &mut D,
                    m: &cf::RxMsg,
                ) -> ::core::result::Result<(), cf_rpc::Unanswered> {
                    self.dispatch(dp, m)
                }

                fn counters(&self) -> cf_rpc::RpcCounters {
                    self.rt.counters()
                }
            }
        }
    }

    /// The hidden variant of an enum over the methods when the service has none (every rpc
    /// streams): it keeps `'a` used and holds no value.
    fn no_method_variant(&self) -> TokenStream {
        if self.methods.is_empty() {
            quote! {
                #[doc(hidden)]
                _None(::core::marker::PhantomData<&'a ()>, ::core::convert::Infallible),
            }
        } else {
            quote!()
        }
    }

    /// `match self` over enum `e`, one arm per method (`arm`); without methods, the match of
    /// [`no_method_variant`](Self::no_method_variant), which has no value.
    fn match_methods(
        &self,
        e: &proc_macro2::Ident,
        arm: impl Fn(&Method<'_>) -> TokenStream,
    ) -> TokenStream {
        if self.methods.is_empty() {
            return quote!(match self { #e::_None(_, never) => match *never {} });
        }
        let arms = self.methods.iter().map(arm);
        quote!(match self { #(#arms)* })
    }

    fn reply_enum(&self) -> TokenStream {
        let e = self.item("Reply");
        let doc = format!(
            " A reply of service `{}` read in place, as the open-loop client's `poll` hands it \
             out: which method it answers, and its view.",
            self.full_name
        );
        let variants = self.methods.iter().map(|m| {
            let (v, view) = (&m.variant, self.view(m.def.output));
            let d = format!(" The reply of `{}`.", m.def.full_name);
            quote!(#[doc = #d] #v(#view<'a>),)
        });
        let arms = self.methods.iter().map(|m| {
            let (v, n, view) = (&m.variant, self.number(m), self.view(m.def.output));
            quote!(#n => #e::#v(#view::open(buf)?),)
        });
        // A service whose every rpc streams (skipped) has no reply to open: a `match` of only
        // the refusal would be unreachable code after it.
        let open_body = if self.methods.is_empty() {
            quote! {
                let _ = buf;
                ::core::result::Result::Err(cf_rpc::CallError::WrongType { sent: method, got: method })
            }
        } else {
            quote! {
                ::core::result::Result::Ok(match method {
                    #(#arms)*
                    got => return ::core::result::Result::Err(cf_rpc::CallError::WrongType { sent: method, got }),
                })
            }
        };
        let bytes_body = self.match_methods(&e, |m| {
            let v = &m.variant;
            quote!(#e::#v(v) => v.object().bytes(),)
        });
        let phantom = self.no_method_variant();
        quote! {
            #[doc = #doc]
            #[derive(Clone, Copy)]
            #[allow(dead_code)]
            pub enum #e<'a> {
                #(#variants)*
                #phantom
            }

            #[allow(dead_code)]
            impl<'a> #e<'a> {
                /// Opens `buf`, a reply to a request of message type `method`.
                pub fn open(method: u16, buf: &'a [u8]) -> ::core::result::Result<Self, cf_rpc::CallError> {
                    #open_body
                }

                /// The reply's bytes, as received (e.g. for a checker that compares replies
                /// by their bytes).
                pub fn bytes(&self) -> &'a [u8] {
                    #bytes_body
                }
            }
        }
    }

    fn request_enum(&self) -> TokenStream {
        let (e, methods, client) = (self.item("Call"), self.item("Method"), self.item("Client"));
        let doc = format!(
            " A request to any method of service `{}`, built by the caller (e.g. a load \
             generator's next request, whatever its method): sent through the client without \
             waiting ([`send_with`](Self::send_with)), on a datapath \
             ([`send`](Self::send)), or encoded.",
            self.full_name
        );
        let variants = self.methods.iter().map(|m| {
            let (v, req) = (&m.variant, self.message(m.def.input));
            let d = format!(" A request of `{}`.", m.def.full_name);
            quote!(#[doc = #d] #v(#req<'a>),)
        });
        // Each arm binds the variant's message as `m` and evaluates `body`.
        let each = |body: &dyn Fn(&Method<'_>) -> TokenStream| {
            self.match_methods(&e, |m| {
                let (v, b) = (&m.variant, body(m));
                quote!(#e::#v(m) => #b,)
            })
        };
        // The parameters a body without methods leaves unread.
        let (unread_client, unread_send) = if self.methods.is_empty() {
            (quote!(let _ = client;), quote!(let _ = (dp, conn, msg);))
        } else {
            (
                quote!(),
                quote!(let msg = cf::Msg { ty: self.method().id(), ..msg };),
            )
        };
        let method = self.match_methods(&e, |m| {
            let v = &m.variant;
            quote!(#e::#v(_) => #methods::#v,)
        });
        let send_with = each(&|m| {
            let send = format_ident!("send_{}", snake(&m.def.name));
            quote!(client.#send(m))
        });
        let send = each(&|_| quote!(cf::datapath::Transmit::send_object(dp, conn, msg, m)));
        let encode = each(&|_| quote!(cf::CornflakesObj::serialize_to_vec(m)));
        let phantom = self.no_method_variant();
        quote! {
            #[doc = #doc]
            #[allow(dead_code)]
            pub enum #e<'a> {
                #(#variants)*
                #phantom
            }

            #[allow(dead_code)]
            impl<'a> #e<'a> {
                /// The method it asks for.
                #[inline]
                pub fn method(&self) -> #methods {
                    #method
                }

                /// Sends it through `client` without waiting: its message id, whose reply (or
                /// timeout) the client's `poll` hands out.
                #[inline]
                pub fn send_with<D: cf::Datapath>(
                    &self,
                    client: &mut #client<D>,
                ) -> ::core::result::Result<u32, cf_rpc::CallError> {
                    #unread_client
                    #send_with
                }

                /// Queues it on `conn` of `dp` by serialize-and-send under framing header
                /// `msg`, its message type set to the method's number.
                #[inline]
                pub fn send<D: cf::Datapath>(
                    &self,
                    dp: &mut D,
                    conn: cf::ConnId,
                    msg: cf::Msg,
                ) -> ::core::result::Result<(), cf::SendError> {
                    #unread_send
                    #send
                }

                /// Its encoding.
                pub fn serialize_to_vec(&self) -> ::std::vec::Vec<u8> {
                    #encode
                }
            }
        }
    }

    fn client(&self) -> TokenStream {
        let client = self.item("Client");
        let replies = self.item("Reply");
        let full = self.full_name;
        let doc = format!(
            " A client of service `{full}` on one server connection: one method per rpc that \
             waits for the reply (retrying under the same message id), and an open-loop \
             interface (`send_<method>`, then `poll`) that allocates nothing per request."
        );
        let calls = self.methods.iter().map(|m| {
            let (f, n) = (&m.fn_name, self.number(m));
            let send = format_ident!("send_{}", snake(&m.def.name));
            let req = self.message(m.def.input);
            let view = self.view(m.def.output);
            let proto_doc = doc_attrs(&m.def.doc);
            let call_doc = format!(
                " Calls `{}`: sends `req` and waits for the reply, sending it again under the \
                 same message id after each timeout (the client's `RetryPolicy`).",
                m.def.full_name
            );
            let send_doc = format!(
                " Sends `req` to `{}` without waiting: its message id, whose reply (or \
                 timeout) [`poll`](Self::poll) hands out.",
                m.def.full_name
            );
            quote! {
                #proto_doc
                #[doc = ""]
                #[doc = #call_doc]
                pub fn #f(
                    &mut self,
                    req: &#req<'_>,
                ) -> ::core::result::Result<cf_rpc::Response<#view<'static>>, cf_rpc::CallError> {
                    self.inner.call(#n, req).map(cf_rpc::Response::new)
                }

                #[doc = #send_doc]
                #[inline]
                pub fn #send(&mut self, req: &#req<'_>) -> ::core::result::Result<u32, cf_rpc::CallError> {
                    self.inner.send(#n, req)
                }
            }
        });
        quote! {
            #[doc = #doc]
            #[allow(dead_code)]
            pub struct #client<D> {
                inner: cf_rpc::Client<D>,
            }

            #[allow(dead_code)]
            impl<D: cf::Datapath> #client<D> {
                /// A client of the server on `conn` of `dp`, waiting and retrying by `policy`.
                pub fn new(dp: D, conn: cf::ConnId, policy: cf_rpc::RetryPolicy) -> Self {
                    #client { inner: cf_rpc::Client::new(dp, conn, policy) }
                }

                /// A client on the runtime's `client` (e.g. one made with room for more
                /// outstanding requests).
                pub fn from_client(client: cf_rpc::Client<D>) -> Self {
                    #client { inner: client }
                }

                /// The runtime client (counters, datapath).
                pub fn inner(&self) -> &cf_rpc::Client<D> {
                    &self.inner
                }

                /// The runtime client, mutably.
                pub fn inner_mut(&mut self) -> &mut cf_rpc::Client<D> {
                    &mut self.inner
                }

                /// The runtime client, given back.
                pub fn into_inner(self) -> cf_rpc::Client<D> {
                    self.inner
                }

                #(#calls)*

                /// Flushes what was sent, receives one burst and hands each reply to an
                /// outstanding request to `reply` with its message id, read in place (or why
                /// there is none: an error reply, a timeout). Returns the messages received.
                #[inline]
                pub fn poll(
                    &mut self,
                    mut reply: impl FnMut(u32, ::core::result::Result<#replies<'_>, cf_rpc::CallError>),
                ) -> usize {
                    self.inner.poll(|id, method, r| {
                        reply(id, r.and_then(|m| #replies::open(method, m.data.as_slice())))
                    })
                }
            }
        }
    }

    /// `impl cf_rpc::ReplyView` for the view of each reply message not given one yet.
    fn reply_views(&self, done: &mut HashSet<MsgId>) -> TokenStream {
        let impls = self
            .methods
            .iter()
            .filter(|m| done.insert(m.def.output))
            .map(|m| {
                let view = self.view(m.def.output);
                quote! {
                    impl cf_rpc::ReplyView for #view<'static> {
                        type View<'a> = #view<'a>;
                    }
                }
            });
        quote!(#(#impls)*)
    }
}
