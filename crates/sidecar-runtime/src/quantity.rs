//! Kubernetes quantities as the sidecars read and write them, typed: the parsing and printing rules live in
//! [`csi_client::quantity`] (csictl reads the same syntax from its command line).

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

pub use csi_client::quantity::QuantityError;

/// The byte count of a quantity, rounded up to a whole byte as Go's `Quantity.Value()`; saturates at `i64`.
pub fn quantity_bytes(quantity: &Quantity) -> Result<i64, QuantityError> {
    csi_client::quantity::quantity_bytes(&quantity.0)
}

/// A byte count as Kubernetes writes it in binary-SI form (`1Gi`, `1536`, `1k`).
pub fn binary_si_quantity(bytes: i64) -> Quantity {
    Quantity(csi_client::quantity::binary_si(bytes))
}

#[cfg(test)]
#[path = "quantity_prop.rs"]
mod prop_tests;
