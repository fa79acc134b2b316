//! `--node-deployment`: one instance per node, which learns its node from the `NODE_NAME` environment variable.

/// The environment variable that names the node under `--node-deployment`.
pub const NODE_NAME_ENV: &str = "NODE_NAME";

/// `--node-deployment` without the node to serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the NODE_NAME environment variable must be set when using --node-deployment")]
pub struct MissingNodeName;

/// With `node_deployment`, the node this instance serves: `node_name_env` (`NODE_NAME`), which must be set and
/// non-empty. `None` without node deployment.
pub fn node_name(node_deployment: bool, node_name_env: Option<String>) -> Result<Option<String>, MissingNodeName> {
    if !node_deployment {
        return Ok(None);
    }
    node_name_env.filter(|n| !n.is_empty()).map(Some).ok_or(MissingNodeName)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_deployment_needs_node_name() {
        // (rule, node deployment, NODE_NAME, result)
        let table = [
            ("central deployment ignores NODE_NAME", false, Some("n1"), Ok(None)),
            ("central deployment needs no NODE_NAME", false, None, Ok(None)),
            ("node mode serves NODE_NAME", true, Some("n1"), Ok(Some("n1".to_string()))),
            ("node mode without NODE_NAME fails", true, None, Err(MissingNodeName)),
            ("node mode with an empty NODE_NAME fails", true, Some(""), Err(MissingNodeName)),
        ];
        for (rule, node_deployment, env, want) in table {
            assert_eq!(node_name(node_deployment, env.map(str::to_string)), want, "{rule}");
        }
        assert!(MissingNodeName.to_string().contains(NODE_NAME_ENV));
    }
}
