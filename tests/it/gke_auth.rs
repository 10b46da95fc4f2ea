//! Application Default Credentials through google-cloud-auth, offline: the token endpoints named in
//! the credential files point at a local mock, and the environment ADC reads is a map the test
//! passes ([`AdcTokenSource::with_scopes`] takes a lookup), so the test shares its process with
//! the others.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::routing::post;
use gkq::addr::ClusterRef;
use gkq::emulator::{Emulator, EmulatorConfig};
use gkq::gke::{AdcTokenSource, GkeApi, GkeError, RestGke, TokenSource};
use secrecy::ExposeSecret;
use serde_json::json;

async fn mock_token_endpoints() -> (String, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let (s1, s2) = (seen.clone(), seen.clone());
    let app = Router::new()
        // authorized_user refresh (gcloud auth application-default login).
        .route(
            "/token",
            post(move |body: String| async move {
                s1.lock().unwrap().push(body);
                axum::Json(
                    json!({"access_token": "user-access-token", "token_type": "Bearer",
                    "expires_in": 3600, "scope": "https://www.googleapis.com/auth/cloud-platform"}),
                )
            }),
        )
        // Security Token Service exchange (external_account / workload identity federation).
        .route(
            "/v1/token",
            post(move |body: String| async move {
                s2.lock().unwrap().push(body);
                axum::Json(
                    json!({"access_token": "sts-access-token", "token_type": "Bearer",
                    "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
                    "expires_in": 3600}),
                )
            }),
        );
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), seen)
}

/// An environment of the given variables only.
fn env(vars: &[(&str, &Path)]) -> impl Fn(&str) -> Option<OsString> {
    let vars: HashMap<String, OsString> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.as_os_str().to_owned()))
        .collect();
    move |name| vars.get(name).cloned()
}

#[tokio::test]
async fn application_default_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let (mock, seen) = mock_token_endpoints().await;

    // A GOOGLE_APPLICATION_CREDENTIALS that names a missing file is an error (no fall-through).
    let missing = dir.path().join("missing.json");
    match AdcTokenSource::new(&env(&[("GOOGLE_APPLICATION_CREDENTIALS", &missing)])) {
        Err(GkeError::Auth(m)) => assert!(m.contains("application default credentials"), "{m}"),
        r => panic!("{r:?}"),
    }

    // authorized_user, as written by `gcloud auth application-default login`.
    let user = dir.path().join("user.json");
    std::fs::write(
        &user,
        json!({"type": "authorized_user", "client_id": "id.apps.googleusercontent.com",
            "client_secret": "client-secret", "refresh_token": "refresh-token",
            "token_uri": format!("{mock}/token"), "quota_project_id": "billing-project"})
        .to_string(),
    )
    .unwrap();
    let src =
        Arc::new(AdcTokenSource::new(&env(&[("GOOGLE_APPLICATION_CREDENTIALS", &user)])).unwrap());
    assert_eq!(
        src.token().await.unwrap().expose_secret(),
        "user-access-token"
    );
    assert!(!format!("{src:?}").contains("refresh-token"));
    let user_src = src.clone();
    let refresh = seen.lock().unwrap()[0].clone();
    assert!(
        refresh.contains("refresh_token") && refresh.contains("refresh-token"),
        "{refresh}"
    );

    // Without GOOGLE_APPLICATION_CREDENTIALS, gcloud's file under $HOME; the variable wins over
    // it; with neither, the metadata server (no file read).
    let home = dir.path().join("home");
    let gcloud = home.join(".config/gcloud");
    std::fs::create_dir_all(&gcloud).unwrap();
    std::fs::copy(&user, gcloud.join("application_default_credentials.json")).unwrap();
    let from_home = AdcTokenSource::new(&env(&[("HOME", &home)])).unwrap();
    assert!(
        format!("{from_home:?}").contains("application_default_credentials.json"),
        "{from_home:?}"
    );
    assert_eq!(
        from_home.token().await.unwrap().expose_secret(),
        "user-access-token"
    );
    match AdcTokenSource::new(&env(&[
        ("HOME", &home),
        ("GOOGLE_APPLICATION_CREDENTIALS", &missing),
    ])) {
        Err(GkeError::Auth(m)) => assert!(m.contains("missing.json"), "{m}"),
        r => panic!("{r:?}"),
    }
    let nowhere = AdcTokenSource::new(&env(&[("HOME", &dir.path().join("empty"))])).unwrap();
    assert!(format!("{nowhere:?}").contains("file: None"), "{nowhere:?}");

    // A file that is not JSON, or of a type ADC does not know, is an error naming the file.
    let garbled = dir.path().join("garbled.json");
    std::fs::write(&garbled, "not json").unwrap();
    match AdcTokenSource::new(&env(&[("GOOGLE_APPLICATION_CREDENTIALS", &garbled)])) {
        Err(GkeError::Auth(m)) => assert!(m.contains("garbled.json"), "{m}"),
        r => panic!("{r:?}"),
    }
    let odd = dir.path().join("odd.json");
    std::fs::write(&odd, json!({"type": "carrier_pigeon"}).to_string()).unwrap();
    match AdcTokenSource::new(&env(&[("GOOGLE_APPLICATION_CREDENTIALS", &odd)])) {
        Err(GkeError::Auth(m)) => assert!(
            m.contains("carrier_pigeon") && m.contains("odd.json"),
            "{m}"
        ),
        r => panic!("{r:?}"),
    }

    // GOOGLE_CLOUD_QUOTA_PROJECT overrides the file's quota project.
    let overridden = AdcTokenSource::new(&env(&[
        ("GOOGLE_APPLICATION_CREDENTIALS", &user),
        ("GOOGLE_CLOUD_QUOTA_PROJECT", Path::new("env-project")),
    ]))
    .unwrap();
    assert_eq!(
        overridden.quota_project().await.as_deref(),
        Some("env-project")
    );

    // external_account (workload identity federation in CI): an OIDC token from a file,
    // exchanged at the STS endpoint for an access token with the cloud-platform scope.
    let oidc = dir.path().join("oidc-token");
    std::fs::write(&oidc, "github-oidc-jwt").unwrap();
    let wif = dir.path().join("wif.json");
    std::fs::write(
        &wif,
        json!({"type": "external_account",
            "audience": "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/ci/providers/github",
            "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
            "token_url": format!("{mock}/v1/token"),
            "credential_source": {"file": oidc}})
        .to_string(),
    )
    .unwrap();
    let src =
        Arc::new(AdcTokenSource::new(&env(&[("GOOGLE_APPLICATION_CREDENTIALS", &wif)])).unwrap());
    assert_eq!(
        src.token().await.unwrap().expose_secret(),
        "sts-access-token"
    );
    let exchange = seen.lock().unwrap().last().cloned().unwrap();
    assert!(
        exchange.contains("subject_token=github-oidc-jwt"),
        "{exchange}"
    );
    assert!(exchange.contains("cloud-platform"), "{exchange}");

    // The REST client sends it as a bearer token.
    let (url, emu) = Emulator::start_in_process(EmulatorConfig::instant())
        .await
        .unwrap();
    let api = RestGke::with_endpoint(&url, src).unwrap();
    let c = ClusterRef {
        project: "p".into(),
        location: "us-east5-b".into(),
        cluster: "c".into(),
    };
    assert_eq!(api.get_cluster(&c).await.unwrap(), None);
    assert!(emu.requests().iter().all(|r| r.authorized));
    assert!(
        emu.requests().iter().all(|r| r.user_project.is_none()),
        "WIF credentials name no quota project"
    );

    // User credentials with a quota project bill API quota to it: the header goes with every
    // request.
    let api = RestGke::with_endpoint(&url, user_src).unwrap();
    assert_eq!(api.get_cluster(&c).await.unwrap(), None);
    let last = emu.requests().last().cloned().unwrap();
    assert_eq!(last.user_project.as_deref(), Some("billing-project"));
}
