//! Storage sizes: a Kubernetes quantity and the byte count it stands for (the conversions are
//! [`sidecar_runtime::quantity`]'s).

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
pub use sidecar_runtime::quantity::QuantityError;
use sidecar_runtime::quantity::{binary_si_quantity, quantity_bytes};

/// A size as written in the API, with its byte count (rounded up to a whole byte, as Go's `Quantity.Value()`).
/// Sizes compare by bytes, as Go's `Quantity.Cmp` compares them for any size a volume can have.
#[derive(Clone, Debug, PartialEq)]
pub struct Size {
    pub quantity: Quantity,
    pub bytes: i64,
}

impl Size {
    pub fn parse(quantity: &Quantity) -> Result<Size, QuantityError> {
        Ok(Size { quantity: quantity.clone(), bytes: quantity_bytes(quantity)? })
    }

    /// The size a driver answered, written in binary-SI form.
    pub fn from_bytes(bytes: i64) -> Size {
        Size { quantity: binary_si_quantity(bytes), bytes }
    }

    /// Go's zero `Quantity`, which a missing map entry reads as.
    pub fn zero() -> Size {
        Size { quantity: Quantity("0".to_string()), bytes: 0 }
    }
}
