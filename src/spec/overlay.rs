//! Environment overlays: `environments/<env>.yaml` deep-merged over the base spec.
//!
//! Maps merge key by key; lists whose items all have a `name` merge item by item (matched by
//! name, new names appended); any other value in the overlay replaces the base value; `null` in
//! the overlay removes the key.

use std::collections::HashMap;

use super::node::{Key, Node, NodeKind};

/// Merges `overlay` over `base` as the module docs say.
///
/// Keys and names are looked up in an index, so merging costs the size of the two documents, not
/// their product.
pub fn merge(base: Node, overlay: Node) -> Node {
    match (base.kind, overlay.kind) {
        (NodeKind::Map(entries), NodeKind::Map(over)) => {
            let mut index: HashMap<String, usize> = entries
                .iter()
                .enumerate()
                .map(|(i, (k, _))| (k.name.clone(), i))
                .collect();
            let mut slots: Vec<Option<(Key, Node)>> = entries.into_iter().map(Some).collect();
            for (key, value) in over {
                let existing = index.get(&key.name).copied();
                match (existing, &value.kind) {
                    (Some(i), NodeKind::Null) => {
                        slots[i] = None;
                        index.remove(&key.name);
                    }
                    (Some(i), _) => {
                        slots[i] = slots[i].take().map(|(_, old)| (key, merge(old, value)));
                    }
                    (None, NodeKind::Null) => {}
                    (None, _) => {
                        index.insert(key.name.clone(), slots.len());
                        slots.push(Some((key, value)));
                    }
                }
            }
            Node::new(
                NodeKind::Map(slots.into_iter().flatten().collect()),
                base.span,
            )
        }
        (NodeKind::Seq(items), NodeKind::Seq(over))
            if all_named(&items) && all_named(&over) && !over.is_empty() =>
        {
            let mut merged: Vec<Option<Node>> = items.into_iter().map(Some).collect();
            let mut index: HashMap<String, usize> = HashMap::new();
            for (i, item) in merged.iter().enumerate() {
                if let Some(name) = item.as_ref().and_then(name_of) {
                    index.entry(name.to_string()).or_insert(i);
                }
            }
            for item in over {
                let name = name_of(&item).unwrap_or_default().to_string();
                match index.get(&name).copied() {
                    Some(i) => merged[i] = merged[i].take().map(|old| merge(old, item)),
                    None => {
                        index.insert(name, merged.len());
                        merged.push(Some(item));
                    }
                }
            }
            Node::new(
                NodeKind::Seq(merged.into_iter().flatten().collect()),
                base.span,
            )
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
