//! `gkq schema`: the JSON Schema of the spec, for editors and CI.

use super::Exit;
use super::output::print_stdout;

pub fn schema_json() -> String {
    let schema = schemars::schema_for!(crate::spec::types::Spec);
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}

pub fn run() -> anyhow::Result<Exit> {
    print_stdout(&schema_json())?;
    Ok(Exit::Ok)
}
