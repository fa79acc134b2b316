//! Prints the snapshot and group snapshot CRDs as one YAML stream, or with `--write` refreshes the Helm chart's copies.

use std::path::Path;

use snapshot_api::crds::{CHART_CRD_DIR, all_crds, to_yaml};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let write = std::env::args().skip(1).any(|a| a == "--write");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for (file, crd) in all_crds() {
        let yaml = to_yaml(&crd)?;
        if write {
            let path = root.join(CHART_CRD_DIR).join(file);
            std::fs::create_dir_all(path.parent().unwrap_or(&root))?;
            std::fs::write(&path, yaml)?;
            eprintln!("wrote {}", path.display());
        } else {
            print!("{yaml}");
        }
    }
    Ok(())
}
