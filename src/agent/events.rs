//! Events aggregated as client-go's event recorder does it: the same Event about the same stack
//! (same type, reason and note) seen again within [`SERIES_WINDOW`] of its last occurrence is a
//! series on the first Event object (`series.count`, `series.lastObservedTime`), not a new
//! object. A failing stack therefore leaves one Event whose count grows, however often it is
//! reconciled. docs/agent.md (section 5) cites the upstream rules.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};

use serde::{Deserialize, Serialize};

/// How long after its last occurrence an Event is still continued by the same one: client-go's
/// `tools/events` and kube-runtime's recorder both use 6 minutes.
pub const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

/// `Normal` or `Warning`, as Kubernetes Events have it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Severity {
    Normal,
    Warning,
}

/// What makes two Events the same: the object they regard, their type, reason and note.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventKey {
    /// `namespace/name` of the stack.
    pub regarding: String,
    pub severity: Severity,
    pub reason: String,
    pub note: String,
}

/// Whether an Event last seen at `last` is continued by the same Event at `now`.
pub fn continues_series(last: Timestamp, now: Timestamp) -> bool {
    let window = i64::try_from(SERIES_WINDOW.as_millis()).unwrap_or(i64::MAX);
    now.as_millisecond().saturating_sub(last.as_millisecond()) < window
}

/// An Event object written, and how many times it happened.
#[derive(Debug, Clone)]
struct Written {
    name: String,
    count: i32,
    last: Timestamp,
}

/// Records Events in the API server (`events.k8s.io/v1`), aggregating repeats into a series.
pub struct Recorder {
    client: kube::Client,
    controller: String,
    instance: String,
    written: tokio::sync::Mutex<HashMap<EventKey, Written>>,
}

impl Recorder {
    pub fn new(client: kube::Client, controller: &str, instance: &str) -> Self {
        Recorder {
            client,
            controller: controller.to_string(),
            instance: instance.to_string(),
            written: Default::default(),
        }
    }

    /// Records `note` about the object `regarding`: a new Event, or one more of the series of
    /// the same Event written lately.
    pub async fn publish(
        &self,
        regarding: &ObjectReference,
        severity: Severity,
        reason: &str,
        note: &str,
    ) -> Result<(), kube::Error> {
        let namespace = regarding.namespace.clone().unwrap_or_default();
        let key = EventKey {
            regarding: format!(
                "{namespace}/{}",
                regarding.name.as_deref().unwrap_or_default()
            ),
            severity,
            reason: reason.to_string(),
            note: note.to_string(),
        };
        let now = Timestamp::now();
        let mut written = self.written.lock().await;
        written.retain(|_, w| continues_series(w.last, now));
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        if let Some(earlier) = written.get(&key).cloned() {
            let count = earlier.count + 1;
            let series = serde_json::json!({
                "series": {"count": count, "lastObservedTime": MicroTime(now)}
            });
            match api
                .patch(
                    &earlier.name,
                    &PatchParams::default(),
                    &Patch::Merge(&series),
                )
                .await
            {
                Ok(_) => {
                    written.insert(
                        key,
                        Written {
                            count,
                            last: now,
                            ..earlier
                        },
                    );
                    return Ok(());
                }
                // The API server dropped it (its event TTL): a new Event starts.
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        let event = self.event(regarding, &key, now);
        let name = event.metadata.name.clone().unwrap_or_default();
        api.create(&PostParams::default(), &event).await?;
        written.insert(
            key,
            Written {
                name,
                count: 1,
                last: now,
            },
        );
        Ok(())
    }

    fn event(&self, regarding: &ObjectReference, key: &EventKey, now: Timestamp) -> Event {
        Event {
            metadata: ObjectMeta {
                namespace: regarding.namespace.clone(),
                name: Some(format!(
                    "{}.{:x}",
                    regarding.name.as_deref().unwrap_or(&self.controller),
                    now.as_nanosecond()
                )),
                ..ObjectMeta::default()
            },
            action: Some("Reconcile".to_string()),
            reason: Some(key.reason.clone()),
            note: Some(key.note.clone()),
            type_: Some(format!("{:?}", key.severity)),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            ..Event::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_continues_its_series_for_six_minutes_after_it_was_last_seen() {
        let last: Timestamp = "2026-12-01T10:00:00Z".parse().unwrap();
        let at = |t: &str| t.parse::<Timestamp>().unwrap();
        assert!(continues_series(last, at("2026-12-01T10:00:01Z")));
        assert!(continues_series(last, at("2026-12-01T10:05:59Z")));
        assert!(!continues_series(last, at("2026-12-01T10:06:00Z")));
    }
}
