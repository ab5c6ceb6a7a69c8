//! Fixed-size little-endian scalars as they appear in slots and packed arrays.

/// A scalar field type: its slot size and little-endian encoding.
pub trait Scalar: Copy + Default + PartialEq + std::fmt::Debug + 'static {
    /// Bytes in a slot or packed element.
    const SIZE: usize;
    /// Writes `self` into `out[..SIZE]`.
    fn write_le(self, out: &mut [u8]);
    /// Reads from `b[..SIZE]`; `None` when the bytes are not a valid value (bool only).
    fn read_le(b: &[u8]) -> Option<Self>;
}

macro_rules! int_scalar {
    ($($t:ty),*) => {$(
        impl Scalar for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            #[inline]
            fn write_le(self, out: &mut [u8]) {
                out[..Self::SIZE].copy_from_slice(&self.to_le_bytes());
            }
            #[inline]
            fn read_le(b: &[u8]) -> Option<Self> {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(&b[..Self::SIZE]);
                Some(<$t>::from_le_bytes(a))
            }
        }
    )*};
}

int_scalar!(u32, i32, u64, i64, f32, f64);

impl Scalar for bool {
    const SIZE: usize = 1;
    #[inline]
    fn write_le(self, out: &mut [u8]) {
        out[0] = self as u8;
    }
    #[inline]
    fn read_le(b: &[u8]) -> Option<Self> {
        match b[0] {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }
}
