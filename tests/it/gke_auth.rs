//! Application Default Credentials through google-cloud-auth, offline: the token endpoints named in
//! the credential files point at a local mock.
//!
//! ADC reads `GOOGLE_APPLICATION_CREDENTIALS` from the process environment, which the test has to
//! change, and the other tests of this binary run in threads of the same process. So the test
//! runs in a process of its own: [`application_default_credentials`] starts this test binary
//! again with only [`application_default_credentials_alone`] selected.

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

/// Set in the process that runs [`application_default_credentials_alone`], and only there.
const ALONE: &str = "GKQ_TEST_ADC_ALONE";

fn set_adc(path: &std::path::Path) {
    assert!(
        std::env::var_os(ALONE).is_some(),
        "changes the process environment: only in a process of its own"
    );
    // SAFETY: this process runs this one test on one thread (see the module docs).
    unsafe { std::env::set_var("GOOGLE_APPLICATION_CREDENTIALS", path) };
}

#[test]
fn application_default_credentials() {
    let name = "gke_auth::application_default_credentials_alone";
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--include-ignored", "--test-threads=1"])
        .env(ALONE, "1")
        .env_remove("GOOGLE_APPLICATION_CREDENTIALS")
        .env_remove("CLOUDSDK_CONFIG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{}",
        crate::support::process::explain(&out)
    );
}

#[tokio::test]
#[ignore = "changes the process environment; run in a process of its own by application_default_credentials"]
async fn application_default_credentials_alone() {
    if std::env::var_os(ALONE).is_none() {
        // Selected by `--include-ignored` in a process shared with other tests: the run that
        // counts is application_default_credentials's.
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (mock, seen) = mock_token_endpoints().await;

    // A GOOGLE_APPLICATION_CREDENTIALS that names a missing file is an error (no fall-through).
    set_adc(&dir.path().join("missing.json"));
    match AdcTokenSource::new() {
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
    set_adc(&user);
    let src = Arc::new(AdcTokenSource::new().unwrap());
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
    set_adc(&wif);
    let src = Arc::new(AdcTokenSource::new().unwrap());
    assert_eq!(
        src.token().await.unwrap().expose_secret(),
        "sts-access-token"
    );
    let exchange = seen.lock().unwrap()[1].clone();
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
