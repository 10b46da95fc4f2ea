//! Environment overlays: `environments/<env>.yaml` deep-merged over the base spec.
//!
//! Maps merge key by key; lists whose items all have a `name` merge item by item (matched by
//! name, new names appended); any other value in the overlay replaces the base value; `null` in
//! the overlay removes the key.

use super::node::{Node, NodeKind};

pub fn merge(base: Node, overlay: Node) -> Node {
    match (base.kind, overlay.kind) {
        (NodeKind::Map(mut entries), NodeKind::Map(over)) => {
            for (key, value) in over {
                let existing = entries.iter().position(|(k, _)| k.name == key.name);
                match (existing, &value.kind) {
                    (Some(i), NodeKind::Null) => {
                        entries.remove(i);
                    }
                    (Some(i), _) => {
                        let (_, old) = entries.remove(i);
                        entries.insert(i, (key, merge(old, value)));
                    }
                    (None, NodeKind::Null) => {}
                    (None, _) => entries.push((key, value)),
                }
            }
            Node::new(NodeKind::Map(entries), base.span)
        }
        (NodeKind::Seq(items), NodeKind::Seq(over))
            if all_named(&items) && all_named(&over) && !over.is_empty() =>
        {
            let mut merged = items;
            for item in over {
                let name = name_of(&item).map(str::to_string);
                match merged.iter().position(|m| name_of(m) == name.as_deref()) {
                    Some(i) => {
                        let old = merged.remove(i);
                        merged.insert(i, merge(old, item));
                    }
                    None => merged.push(item),
                }
            }
            Node::new(NodeKind::Seq(merged), base.span)
        }
        (_, kind) => Node::new(kind, overlay.span),
    }
}

fn name_of(node: &Node) -> Option<&str> {
    node.get("name").and_then(Node::as_str)
}

fn all_named(items: &[Node]) -> bool {
    items.iter().all(|i| name_of(i).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::node::parse_yaml;
    use crate::spec::source::SourceMap;

    fn yaml(sources: &mut SourceMap, text: &str) -> Node {
        let id = sources.add("t.yaml", text);
        parse_yaml(sources, id).unwrap()
    }

    #[test]
    fn named_lists_merge_by_name_and_null_removes() {
        let mut s = SourceMap::default();
        let base = yaml(
            &mut s,
            "a: 1\nb: {c: 2, d: 3}\npools:\n- {name: x, max: 4}\n- {name: y, max: 1}\n",
        );
        let over = yaml(
            &mut s,
            "a: 5\nb: {d: null}\npools:\n- {name: y, max: 8}\n- {name: z, max: 2}\n",
        );
        let merged = merge(base, over).to_json();
        assert_eq!(
            merged,
            serde_json::json!({"a": 5, "b": {"c": 2}, "pools": [
                {"name": "x", "max": 4}, {"name": "y", "max": 8}, {"name": "z", "max": 2}]})
        );
    }

    #[test]
    fn plain_lists_are_replaced() {
        let mut s = SourceMap::default();
        let base = yaml(&mut s, "pip: [a, b]\n");
        let over = yaml(&mut s, "pip: [c]\n");
        assert_eq!(
            merge(base, over).to_json(),
            serde_json::json!({"pip": ["c"]})
        );
    }
}
