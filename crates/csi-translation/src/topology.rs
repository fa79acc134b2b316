//! Topology keys between the in-tree form (the well-known zone and region labels, in a PV's node affinity and
//! labels) and a driver's own zone key; shared by the plugins.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PersistentVolume, TopologySelectorLabelRequirement,
    TopologySelectorTerm, VolumeNodeAffinity,
};

pub const LABEL_ZONE: &str = "topology.kubernetes.io/zone";
pub const LABEL_REGION: &str = "topology.kubernetes.io/region";
pub const LABEL_BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
pub const LABEL_BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";
/// How a PV label lists several zones.
pub const MULTI_ZONE_DELIMITER: &str = "__";

/// Derives the region of a PV's zones (plugins whose regions can be told from zone names).
pub type RegionFromZones = fn(&[String]) -> Result<String, String>;

fn terms_mut(pv: &mut PersistentVolume) -> Option<&mut Vec<NodeSelectorTerm>> {
    let terms = &mut pv.spec.as_mut()?.node_affinity.as_mut()?.required.as_mut()?.node_selector_terms;
    (!terms.is_empty()).then_some(terms)
}

fn terms(pv: &PersistentVolume) -> &[NodeSelectorTerm] {
    pv.spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref()?.required.as_ref())
        .map(|r| r.node_selector_terms.as_slice())
        .unwrap_or_default()
}

fn has_key(pv: &PersistentVolume, key: &str) -> bool {
    terms(pv).iter().flat_map(|t| t.match_expressions.iter().flatten()).any(|r| r.key == key)
}

pub fn label<'a>(pv: &'a PersistentVolume, key: &str) -> Option<&'a String> {
    pv.metadata.labels.as_ref()?.get(key)
}

/// Renames `old` to `new` in every node affinity requirement.
pub fn replace_key(pv: &mut PersistentVolume, old: &str, new: &str) {
    let Some(terms) = terms_mut(pv) else { return };
    for requirement in terms.iter_mut().flat_map(|t| t.match_expressions.iter_mut().flatten()) {
        if requirement.key == old {
            requirement.key = new.to_string();
        }
    }
}

/// Every value the node affinity allows for `key`, sorted, without repeats.
pub fn values_of(pv: &PersistentVolume, key: &str) -> Vec<String> {
    let values: BTreeSet<String> = terms(pv)
        .iter()
        .flat_map(|t| t.match_expressions.iter().flatten())
        .filter(|r| r.key == key)
        .flat_map(|r| r.values.iter().flatten().cloned())
        .collect();
    values.into_iter().collect()
}

/// Requires `key` In `zones` in every term (creating one when there is none).
pub fn add_requirement(pv: &mut PersistentVolume, key: &str, zones: &[String]) {
    let zones: BTreeSet<String> = zones.iter().map(|z| z.trim().to_string()).filter(|z| !z.is_empty()).collect();
    if zones.is_empty() {
        return;
    }
    let spec = pv.spec.get_or_insert_with(Default::default);
    let affinity = spec.node_affinity.get_or_insert_with(VolumeNodeAffinity::default);
    let required = affinity.required.get_or_insert_with(NodeSelector::default);
    if required.node_selector_terms.is_empty() {
        required.node_selector_terms.push(NodeSelectorTerm::default());
    }
    for term in &mut required.node_selector_terms {
        term.match_expressions.get_or_insert_with(Vec::new).push(NodeSelectorRequirement {
            key: key.to_string(),
            operator: "In".to_string(),
            values: Some(zones.iter().cloned().collect()),
        });
    }
}

/// Which zone and region labels the PV uses: the GA ones unless it already uses the beta ones.
pub fn zone_labels(pv: &PersistentVolume) -> (&'static str, &'static str) {
    if has_key(pv, LABEL_ZONE) {
        (LABEL_ZONE, LABEL_REGION)
    } else if has_key(pv, LABEL_BETA_ZONE) {
        (LABEL_BETA_ZONE, LABEL_BETA_REGION)
    } else if label(pv, LABEL_ZONE).is_some() {
        (LABEL_ZONE, LABEL_REGION)
    } else if label(pv, LABEL_BETA_ZONE).is_some() {
        (LABEL_BETA_ZONE, LABEL_BETA_REGION)
    } else {
        (LABEL_ZONE, LABEL_REGION)
    }
}

/// An in-tree PV's zones under the driver's key: from its node affinity, else from its zone label. A beta region
/// requirement becomes the GA one.
pub fn in_tree_to_csi(pv: &mut PersistentVolume, driver_zone_key: &str) {
    let (zone_label, region_label) = zone_labels(pv);
    if !values_of(pv, zone_label).is_empty() {
        replace_key(pv, zone_label, driver_zone_key);
    } else if let Some(zones) = label(pv, zone_label).cloned() {
        let zones: Vec<String> = zones.split(MULTI_ZONE_DELIMITER).map(str::to_string).collect();
        add_requirement(pv, driver_zone_key, &zones);
    }
    if region_label == LABEL_BETA_REGION && !values_of(pv, region_label).is_empty() {
        replace_key(pv, region_label, LABEL_REGION);
    }
}

/// A CSI PV's zones back under the zone label, with a region requirement derived from them when the plugin can,
/// and the zone (and single region) labels set when missing.
pub fn csi_to_in_tree(
    pv: &mut PersistentVolume,
    driver_zone_key: &str,
    region_from_zones: Option<RegionFromZones>,
) -> Result<(), String> {
    let (zone_label, _) = zone_labels(pv);
    replace_key(pv, driver_zone_key, zone_label);
    if let Some(region_from_zones) = region_from_zones {
        add_regions(pv, region_from_zones)?;
    }
    let zones = values_of(pv, zone_label);
    if !zones.is_empty() {
        let labels = pv.metadata.labels.get_or_insert_with(Default::default);
        labels.entry(zone_label.to_string()).or_insert_with(|| zones.join(MULTI_ZONE_DELIMITER));
    }
    Ok(())
}

/// Every term without a region requirement gets the region of its zones.
fn add_regions(pv: &mut PersistentVolume, region_from_zones: RegionFromZones) -> Result<(), String> {
    let (zone_label, region_label) = zone_labels(pv);
    let Some(terms) = terms_mut(pv) else { return Ok(()) };
    for term in terms.iter_mut() {
        let requirements = term.match_expressions.get_or_insert_with(Vec::new);
        if requirements.iter().any(|r| r.key == region_label) {
            continue;
        }
        let zones: Vec<String> = requirements
            .iter()
            .filter(|r| r.key == zone_label)
            .flat_map(|r| r.values.iter().flatten().cloned())
            .collect();
        let region = region_from_zones(&zones)?;
        requirements.push(NodeSelectorRequirement {
            key: region_label.to_string(),
            operator: "In".to_string(),
            values: Some(vec![region]),
        });
    }
    if let [region] = values_of(pv, region_label).as_slice() {
        let labels = pv.metadata.labels.get_or_insert_with(Default::default);
        labels.entry(region_label.to_string()).or_insert_with(|| region.clone());
    }
    Ok(())
}

/// A class's allowed topologies with the zone labels (GA or beta) renamed to the driver's key.
pub fn allowed_topologies_to_csi(terms: &[TopologySelectorTerm], driver_zone_key: &str) -> Vec<TopologySelectorTerm> {
    terms
        .iter()
        .map(|term| TopologySelectorTerm {
            match_label_expressions: term.match_label_expressions.as_ref().map(|expressions| {
                expressions
                    .iter()
                    .map(|e| match e.key.as_str() {
                        LABEL_ZONE | LABEL_BETA_ZONE => TopologySelectorLabelRequirement {
                            key: driver_zone_key.to_string(),
                            values: e.values.clone(),
                        },
                        _ => e.clone(),
                    })
                    .collect()
            }),
        })
        .collect()
}

/// The allowed topology for a class's `zone`/`zones` parameter.
pub fn zone_selector(driver_zone_key: &str, zones: Vec<String>) -> Vec<TopologySelectorTerm> {
    vec![TopologySelectorTerm {
        match_label_expressions: Some(vec![TopologySelectorLabelRequirement {
            key: driver_zone_key.to_string(),
            values: zones,
        }]),
    }]
}

/// A class's topology after its `zone`/`zones` parameter (`zones`) and its allowed topologies: one or the other, under
/// the driver's zone key; both at once is an error.
pub fn class_topologies(
    zones: Option<Vec<String>>,
    allowed: Option<Vec<TopologySelectorTerm>>,
    driver_zone_key: &str,
) -> Result<Option<Vec<TopologySelectorTerm>>, crate::TranslationError> {
    let allowed = allowed.unwrap_or_default();
    match (zones, allowed.is_empty()) {
        (Some(_), false) => Err(crate::TranslationError::ZonesAndAllowedTopologies),
        (Some(zones), true) => Ok(Some(zone_selector(driver_zone_key, zones))),
        (None, false) => Ok(Some(allowed_topologies_to_csi(&allowed, driver_zone_key))),
        (None, true) => Ok(None),
    }
}
