//! `gkq validate`: load, check, and list every problem.

use super::output::{print_diagnostics, print_stdout};
use super::{DiagFormat, Exit, ValidateArgs, load_valid};

pub fn run(args: &ValidateArgs) -> anyhow::Result<Exit> {
    let (ok, diags, sources) = load_valid(&args.spec);
    let errors = diags.errors().count();
    let warnings = diags.warnings().count();
    match args.output {
        DiagFormat::Json => {
            let out = serde_json::json!({
                "valid": ok.is_some(),
                "errors": errors,
                "warnings": warnings,
                "diagnostics": diags.report(&sources).to_json(),
            });
            print_stdout(&format!("{}\n", serde_json::to_string_pretty(&out)?))?;
        }
        DiagFormat::Text => {
            print_diagnostics(&diags, &sources);
            match &ok {
                Some((loaded, _)) => print_stdout(&format!(
                    "{} is valid{}.\n",
                    loaded.spec_file.display(),
                    if warnings > 0 {
                        format!(
                            " ({warnings} warning{})",
                            if warnings == 1 { "" } else { "s" }
                        )
                    } else {
                        String::new()
                    }
                ))?,
                None => eprintln!(
                    "{errors} error{} found; nothing was changed.",
                    if errors == 1 { "" } else { "s" }
                ),
            }
        }
    }
    Ok(if ok.is_some() { Exit::Ok } else { Exit::Failed })
}
