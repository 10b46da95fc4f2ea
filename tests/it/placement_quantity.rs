//! Quantity parsing checked against the real Kubernetes implementation.
//!
//! The table below was produced by `resource.ParseQuantity` from k8s.io/apimachinery v0.36.2
//! (the version Kueue v0.19.2 builds with): for each input either `err <kind>` or
//! `ok <canonical String()> <MilliValue()> <Value()>`. Milli/unit values are compared only
//! where they fit in an int64, because Go's accessors silently overflow beyond that.

use gkq::vocab::quantity::{Quantity, QuantityError};

const ORACLE: &str = r#""500m"	ok	500m	500	1
"4Gi"	ok	4Gi	4294967296000	4294967296
"1e3"	ok	1e3	1000000	1000
"20G"	ok	20G	20000000000000	20000000000
"20Gii"	err	suffix
"1000m"	ok	1	1000	1
"0.5"	ok	500m	500	1
"1024Mi"	ok	1Gi	1073741824000	1073741824
"1536Mi"	ok	1536Mi	1610612736000	1610612736
"1.5Gi"	ok	1536Mi	1610612736000	1610612736
"0.5Ki"	ok	512	512000	512
"10"	ok	10	10000	10
"1000000000"	ok	1G	1000000000000	1000000000
"1000000000Gi"	ok	1000000000Gi	3830667724846006272	1073741824000000000
"-1Gi"	ok	-1Gi	-1073741824000	-1073741824
"0"	ok	0	0	0
"00"	ok	0	0	0
"1n"	ok	1n	1	1
"1e-10"	ok	1e-9	1	1
"1."	ok	1	1000	1
"."	ok	0	0	0
"-"	ok	0	0	0
"+"	ok	0	0	0
".5"	ok	500m	500	1
"+1"	ok	1	1000	1
"01"	ok	1	1000	1
"1.0"	ok	1	1000	1
"1x"	err	format
" 1"	err	format
"1 "	err	format
"1K"	err	suffix
"1k"	ok	1k	1000000	1000
"1E"	ok	1E	0	1000000000000000000
"1E3"	ok	1e3	1000000	1000
"1e+3"	ok	1e3	1000000	1000
"1e-3"	ok	1e-3	1	1
"1.5e-3"	ok	1500e-6	2	1
"e3"	ok	0	0	0
"1Ki5"	err	suffix
"1e"	err	suffix
"1Gi1"	err	suffix
"0.1mi"	err	suffix
"1.1.M"	err	format
"1+1.0M"	err	format
"aoeu"	err	format
".5i"	err	suffix
"1i"	err	suffix
"-3.01i"	err	suffix
"-3.01e-"	err	suffix
"100Mi"	ok	100Mi	104857600000	104857600
"200Mi"	ok	200Mi	209715200000	209715200
"512Mi"	ok	512Mi	536870912000	536870912
"2Gi"	ok	2Gi	2147483648000	2147483648
"64Gi"	ok	64Gi	68719476736000	68719476736
"4608Mi"	ok	4608Mi	4831838208000	4831838208
"2500m"	ok	2500m	2500	3
"3"	ok	3	3000	3
"16"	ok	16	16000	16
"12.5Gi"	ok	12800Mi	13421772800000	13421772800
"0.000000001"	ok	1n	1	1
"0.0000000001"	ok	1n	1	1
"1.0000000001"	ok	1000000001n	1001	2
"9223372036854775807"	ok	9223372036854775807	-1000	9223372036854775807
"9223372036854775808"	ok	9223372036854775808	0	-9223372036854775808
"8Ei"	ok	9223372036854775807	-1000	9223372036854775807
"16Ei"	ok	9223372036854775807	-1000	9223372036854775807
"1.5Ei"	ok	1536Pi	-4611686018427387904	1729382256910270464
"1Pi"	ok	1Pi	1125899906842624000	1125899906842624
"1024Ti"	ok	1Pi	1125899906842624000	1125899906842624
"1P"	ok	1P	1000000000000000000	1000000000000000
"1500"	ok	1500	1500000	1500
"1500000"	ok	1500k	1500000000	1500000
"12e6"	ok	12e6	12000000000	12000000
"1e21"	ok	1e21	0	0
"-0.5"	ok	-500m	-500	-1
"-1500m"	ok	-1500m	-1500	-2
"0.3"	ok	300m	300	1
"1.1Mi"	ok	1153433600m	1153433600	1153434
"3Ki"	ok	3Ki	3072000	3072
"1025Mi"	ok	1025Mi	1074790400000	1074790400
"7"	ok	7	7000	7
"999m"	ok	999m	999	1
"1001m"	ok	1001m	1001	2
"1.999"	ok	1999m	1999	2
"5e-1"	ok	500e-3	500	1
"#;

fn unquote(field: &str) -> String {
    serde_json::from_str(field).expect("oracle inputs are JSON-compatible quoted strings")
}

#[test]
fn matches_apimachinery_on_every_oracle_row() {
    let mut checked = 0;
    for row in ORACLE.lines().filter(|l| !l.is_empty()) {
        let fields: Vec<&str> = row.split('\t').collect();
        let input = unquote(fields[0]);
        let parsed = Quantity::parse(&input);
        match fields[1] {
            "err" => {
                let err = parsed.expect_err(&input);
                match fields[2] {
                    "suffix" => assert!(
                        matches!(err, QuantityError::Suffix { .. }),
                        "{input}: {err}"
                    ),
                    "format" => assert!(
                        matches!(err, QuantityError::Format { .. }),
                        "{input}: {err}"
                    ),
                    other => panic!("unexpected oracle error kind {other}"),
                }
            }
            "ok" => {
                let q = parsed.unwrap_or_else(|e| panic!("{input}: {e}"));
                assert_eq!(
                    q.to_canonical_string(),
                    fields[2],
                    "canonical form of {input:?}"
                );
                let milli = q.milli_value();
                if i64::try_from(milli).is_ok() {
                    assert_eq!(milli.to_string(), fields[3], "MilliValue of {input:?}");
                }
                let value = q.value();
                if i64::try_from(value).is_ok() && i64::try_from(milli).is_ok() {
                    assert_eq!(value.to_string(), fields[4], "Value of {input:?}");
                }
            }
            other => panic!("unexpected oracle status {other}"),
        }
        checked += 1;
    }
    assert!(checked > 80);
}

/// Where gkq deliberately differs from Kubernetes.
#[test]
fn documented_divergences() {
    // Kubernetes prints 1000E (10^21) as "1": it has no SI suffix above E. gkq prints an exponent.
    assert_eq!(
        Quantity::parse("1000E").unwrap().to_canonical_string(),
        "1e21"
    );
    // Kubernetes keeps arbitrary precision; gkq rejects magnitudes above 10^27 units.
    assert!(matches!(
        Quantity::parse("123456789012345678901234567890"),
        Err(QuantityError::TooLarge { .. })
    ));
}
