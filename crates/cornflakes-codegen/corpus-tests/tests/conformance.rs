//! protobuf's conformance message, as generated: the odd field names have snake_case
//! accessors, and what is set comes back after encoding.

use cornflakes::{Arena, CFString, CornflakesObj};
use cornflakes_codegen_corpus::protobuf::g0::protobuf_test_messages::proto3::{
    test_all_types_proto3, TestAllTypesProto3,
};

#[test]
fn the_conformance_message_round_trips_through_its_odd_names() {
    let arena = Arena::new();
    let mut m = TestAllTypesProto3::new_in(&arena);
    m.set_optional_int32(-5);
    m.set_field_name3(3); // `_field_name3`
    m.set_field_name4(4); // `field__name4_`
    m.set_field_name13(13); // `__field_name13`
    m.set_field_name18(18); // `Field_name18__`
    m.set_optional_string(CFString::new("héllo", &arena));
    m.get_mut_optional_nested_message().set_a(7);
    m.set_optional_nested_enum(test_all_types_proto3::NestedEnum::Baz);
    m.get_mut_repeated_int64().append(-1);
    m.insert_map_string_string("k", CFString::new("v", &arena));
    m.set_oneof_uint32(9);
    let bytes = m.serialize_to_vec();
    let back = TestAllTypesProto3::deserialize(&bytes, &arena).unwrap();
    assert_eq!(back, m);
    assert_eq!(back.get_field_name13(), 13);
    assert_eq!(back.get_optional_nested_message().unwrap().get_a(), 7);
    assert_eq!(*back.find_map_string_string("k").unwrap().get_value(), "v");
    let view = TestAllTypesProto3::view(&bytes).unwrap();
    assert_eq!(view.get_field_name4(), 4);
    assert_eq!(view.get_optional_string().unwrap(), "héllo");
}
