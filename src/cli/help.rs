//! What each command's `--help` (and `gkq help COMMAND`, which clap makes the same) says beyond
//! its flags: every form of its arguments on the `Usage:` lines, and one example of each form.
//! `tests/it/cli.rs` runs every example's form through the parser.

/// The usage lines and examples of one command.
pub struct Help {
    /// The command as typed: `apply`, `emulator serve`.
    pub command: &'static str,
    /// One line per form of the arguments, without the leading `gkq `.
    pub forms: &'static [&'static str],
    /// One example per form, in the order of `forms`: the command line and what it does.
    pub examples: &'static [(&'static str, &'static str)],
}

impl Help {
    /// The text after `Usage: `: one form a line.
    pub fn usage(&self) -> String {
        self.forms
            .iter()
            .map(|form| format!("gkq {form}"))
            .collect::<Vec<_>>()
            .join("\n       ")
    }

    /// The `Examples:` section printed after the flags: each example's purpose as a shell
    /// comment, then its command line.
    pub fn examples(&self) -> String {
        let examples: Vec<String> = self
            .examples
            .iter()
            .map(|(line, what)| format!("  # {what}\n  {line}"))
            .collect();
        format!("Examples:\n{}", examples.join("\n\n"))
    }
}

/// Every command's help, in the order of `gkq --help`.
pub const COMMANDS: &[Help] = &[
    Help {
        command: "validate",
        forms: &["validate [OPTIONS] [SPEC]"],
        examples: &[(
            "gkq validate examples/tpu-dws --env local",
            "every problem of the spec in the directory, with the local overlay",
        )],
    },
    Help {
        command: "render",
        forms: &["render [OPTIONS] [SPEC]"],
        examples: &[(
            "gkq render examples/tpu-dws/gkq.yaml -o json",
            "the GKE request bodies and Kubernetes objects of a spec file",
        )],
    },
    Help {
        command: "plan",
        forms: &["plan [OPTIONS] [SPEC]"],
        examples: &[(
            "gkq plan examples/tpu-dws --env local --out plan.json",
            "what apply would do, also saved for `gkq apply plan.json`",
        )],
    },
    Help {
        command: "apply",
        forms: &[
            "apply [OPTIONS] [SPEC]",
            "apply [OPTIONS] PLANFILE [--spec PATH | --no-spec-check]",
        ],
        examples: &[
            (
                "gkq apply examples/tpu-dws --env local",
                "plan the spec, show the plan, ask, apply",
            ),
            (
                "gkq apply plan.json",
                "apply exactly the plan `gkq plan --out plan.json` saved, or refuse",
            ),
        ],
    },
    Help {
        command: "destroy",
        forms: &["destroy [OPTIONS] --confirm CLUSTER [SPEC]"],
        examples: &[(
            "gkq destroy examples/tpu-dws --env local --confirm tpu-cluster",
            "delete the cluster and everything gkq created in it",
        )],
    },
    Help {
        command: "status",
        forms: &["status [OPTIONS] [SPEC]"],
        examples: &[(
            "gkq status examples/tpu-dws --env local",
            "the applied revision, drift, and where each job is",
        )],
    },
    Help {
        command: "watch",
        forms: &[
            "watch [OPTIONS] [SPEC]",
            "watch [OPTIONS] --git-remote NAME --branch BRANCH [SPEC]",
        ],
        examples: &[
            (
                "gkq watch examples/tpu-dws --env local --apply",
                "re-plan on every save and apply plans that only create or update",
            ),
            (
                "gkq watch infra --git-remote origin --branch main",
                "plan each new commit of origin/main",
            ),
        ],
    },
    Help {
        command: "explain",
        forms: &["explain [OPTIONS] NAMESPACE/NAME [SPEC]"],
        examples: &[(
            "gkq explain default/rayjob-tpu-v6e-dws-2 examples/tpu-dws --env local",
            "why the job is where it is, flavor by flavor",
        )],
    },
    Help {
        command: "logs",
        forms: &["logs [OPTIONS] NAMESPACE/JOB [SPEC]"],
        examples: &[(
            "gkq logs default/rayjob-tpu-v6e-dws-1 examples/tpu-dws --env local -f",
            "follow the driver's log, waiting while Kueue holds the job back",
        )],
    },
    Help {
        command: "dashboard",
        forms: &["dashboard [OPTIONS] NAMESPACE/JOB [SPEC]"],
        examples: &[(
            "gkq dashboard default/rayjob-tpu-v6e-dws-1 examples/tpu-dws --env local --port 8265",
            "forward http://127.0.0.1:8265 to the job's Ray dashboard until Ctrl-C",
        )],
    },
    Help {
        command: "agent",
        forms: &[
            "agent [OPTIONS]",
            "agent --target local --state-dir DIR --stack FILE... [OPTIONS]",
            "agent --print-crd",
        ],
        examples: &[
            (
                "gkq agent --watch-namespace ml-platform",
                "reconcile the GkqStack objects of the management cluster",
            ),
            (
                "gkq agent --target local --state-dir /tmp/gkq-agent --stack stack.yaml",
                "the same controller on the local target",
            ),
            (
                "gkq agent --print-crd",
                "print the GkqStack CustomResourceDefinition",
            ),
        ],
    },
    Help {
        command: "approve",
        forms: &[
            "approve [OPTIONS] NAMESPACE/STACK DIGEST",
            "approve [OPTIONS] --namespace NS STACK DIGEST",
        ],
        examples: &[
            (
                "gkq approve ml-platform/training sha256:4f2a...",
                "approve the plan the stack holds, by the digest its status shows",
            ),
            (
                "gkq approve -n ml-platform training sha256:4f2a... --state-dir /tmp/gkq-agent",
                "the same in the local target's stack store",
            ),
        ],
    },
    Help {
        command: "schema",
        forms: &["schema"],
        examples: &[("gkq schema > gkq.schema.json", "the spec's JSON Schema")],
    },
    Help {
        command: "emulator",
        forms: &["emulator serve [OPTIONS]"],
        examples: &[(
            "gkq emulator serve --port 18080",
            "serve the GKE REST API on 127.0.0.1:18080",
        )],
    },
    Help {
        command: "emulator serve",
        forms: &["emulator serve [OPTIONS]"],
        examples: &[(
            "gkq emulator serve --port 18080",
            "serve the GKE REST API on 127.0.0.1:18080",
        )],
    },
];

/// The help of `command` (as typed: `apply`, `emulator serve`).
pub fn of(command: &str) -> Option<&'static Help> {
    COMMANDS.iter().find(|help| help.command == command)
}

/// `cli` with each command's usage lines and examples set from [`COMMANDS`].
pub fn with_examples(mut cli: clap::Command) -> clap::Command {
    for help in COMMANDS {
        let path: Vec<&str> = help.command.split(' ').collect();
        cli = edit(cli, &path, help);
    }
    // `apply`'s one positional argument is a spec or a saved plan (`cli::run` tells them apart).
    cli.mut_subcommand("apply", |apply| {
        apply.mut_arg("spec", |spec| {
            spec.value_name("SPEC | PLANFILE").help(
                "A spec file, or a directory holding gkq.yaml or gkq.toml; or a plan file written by \
                 `gkq plan --out FILE`, applied exactly as saved or refused",
            )
        })
    })
}

fn edit(cmd: clap::Command, path: &[&str], help: &'static Help) -> clap::Command {
    match path {
        [] => cmd.override_usage(help.usage()).after_help(help.examples()),
        [first, rest @ ..] => cmd.mut_subcommand(*first, |sub| edit(sub, rest, help)),
    }
}
