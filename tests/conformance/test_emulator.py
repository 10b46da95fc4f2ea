"""The GKE emulator checked with Google's official client, google-cloud-container (REST
transport, anonymous credentials): the seed walk-through's calls and their answers.

The same scenarios run through gkq's own client in tests/gke_client.rs.
"""
import time
from datetime import timedelta

import pytest
from google.api_core import exceptions
from google.cloud import container_v1 as c

P, Z = "conf-project", "us-east5-b"
PARENT = f"projects/{P}/locations/{Z}"
SCOPES = [
    "https://www.googleapis.com/auth/devstorage.read_only",
    "https://www.googleapis.com/auth/logging.write",
    "https://www.googleapis.com/auth/monitoring",
    "https://www.googleapis.com/auth/service.management.readonly",
    "https://www.googleapis.com/auth/servicecontrol",
    "https://www.googleapis.com/auth/trace.append",
]


def wait(client, op, timeout=20):
    """Polls operations.get until DONE (there is no :wait in container v1)."""
    seen = [op.status]
    deadline = time.time() + timeout
    while op.status != c.Operation.Status.DONE:
        assert time.time() < deadline, f"operation {op.name} not done"
        time.sleep(0.05)
        op = client.get_operation(name=f"{PARENT}/operations/{op.name}")
        seen.append(op.status)
    return op, seen


def seed_cluster(name):
    """docs/gke.md a.1: the gcloud create with --cluster-version=1.34 --addons=RayOperator and image
    streaming."""
    return c.Cluster(
        name=name,
        initial_cluster_version="1.34",
        node_pools=[c.NodePool(
            name="default-pool", initial_node_count=3,
            config=c.NodeConfig(machine_type="n2-standard-16", oauth_scopes=SCOPES),
            management=c.NodeManagement(auto_repair=True, auto_upgrade=True))],
        addons_config=c.AddonsConfig(
            ray_operator_config=c.RayOperatorConfig(enabled=True),
            http_load_balancing=c.HttpLoadBalancing(disabled=True),
            horizontal_pod_autoscaling=c.HorizontalPodAutoscaling(disabled=True),
            kubernetes_dashboard=c.KubernetesDashboard(disabled=True),
            network_policy_config=c.NetworkPolicyConfig(disabled=True)),
        node_pool_defaults=c.NodePoolDefaults(node_config_defaults=c.NodeConfigDefaults(
            gcfs_config=c.GcfsConfig(enabled=True))),
    )


def dws_pool(name="dws-pool"):
    """docs/gke.md a.4 / g: the DWS flex-start pool with queued provisioning."""
    return c.NodePool(
        name=name, initial_node_count=0,
        config=c.NodeConfig(
            machine_type="ct6e-standard-4t", flex_start=True,
            reservation_affinity=c.ReservationAffinity(
                consume_reservation_type=c.ReservationAffinity.Type.NO_RESERVATION)),
        autoscaling=c.NodePoolAutoscaling(enabled=True, min_node_count=0, max_node_count=4),
        placement_policy=c.NodePool.PlacementPolicy(tpu_topology="4x4"),
        management=c.NodeManagement(auto_repair=False, auto_upgrade=True),
        queued_provisioning=c.NodePool.QueuedProvisioning(enabled=True))


@pytest.fixture(scope="module")
def cluster(client):
    """The seed cluster, created once (with its operation waited for)."""
    op = client.create_cluster(parent=PARENT, cluster=seed_cluster("seed"))
    assert op.operation_type == c.Operation.Type.CREATE_CLUSTER
    wait(client, op)
    return f"{PARENT}/clusters/seed"


def test_create_and_operation_poll(client):
    op = client.create_cluster(parent=PARENT, cluster=seed_cluster("polled"))
    assert op.name.startswith("operation-")
    assert op.status in (c.Operation.Status.PENDING, c.Operation.Status.RUNNING)
    assert op.target_link.endswith(f"/zones/{Z}/clusters/polled")
    assert op.self_link.endswith(f"/zones/{Z}/operations/{op.name}")
    done, seen = wait(client, op)
    assert c.Operation.Status.RUNNING in seen or c.Operation.Status.PENDING in seen
    assert done.end_time and not done.error.message
    assert done.operation_type == c.Operation.Type.CREATE_CLUSTER
    ops = client.list_operations(parent=PARENT).operations
    assert op.name in [o.name for o in ops]


def test_get_cluster_server_defaults(client, cluster):
    got = client.get_cluster(name=cluster)
    assert got.status == c.Cluster.Status.RUNNING
    assert got.initial_cluster_version == "1.34"
    assert got.current_master_version.startswith("1.34.") and "-gke." in got.current_master_version
    assert got.location == Z and list(got.locations) == [Z]
    assert got.endpoint
    assert got.master_auth.cluster_ca_certificate
    assert got.addons_config.ray_operator_config.enabled
    assert got.addons_config.http_load_balancing.disabled
    assert got.release_channel.channel == c.ReleaseChannel.Channel.REGULAR
    assert got.label_fingerprint and got.etag
    pool = got.node_pools[0]
    assert pool.name == "default-pool" and pool.status == c.NodePool.Status.RUNNING
    assert pool.config.disk_size_gb == 100
    assert pool.config.disk_type == "pd-balanced"
    assert pool.config.image_type == "COS_CONTAINERD"
    assert pool.config.gcfs_config.enabled  # the cluster default reaches the pool
    assert pool.config.metadata["disable-legacy-endpoints"] == "true"
    assert pool.max_pods_constraint.max_pods_per_node == 110
    assert pool.upgrade_settings.strategy == c.NodePoolUpdateStrategy.SURGE
    assert pool.version == got.current_master_version


def test_create_node_pool_wire_format(client, emulator, cluster):
    op = client.create_node_pool(parent=cluster, node_pool=dws_pool())
    assert op.operation_type == c.Operation.Type.CREATE_NODE_POOL
    wait(client, op)
    # What the official client sent: enums as integers, zero values left out, and the
    # enum-encoding query parameter.
    sent = [r for r in emulator.requests()
            if r["method"] == "POST" and r["path"].endswith("/seed/nodePools")][-1]
    assert "enum-encoding%3Dint" in sent["query"] or "enum-encoding=int" in sent["query"]
    body = sent["body"]["nodePool"]
    assert body["config"]["reservationAffinity"] == {"consumeReservationType": 1}
    assert "initialNodeCount" not in body
    assert "minNodeCount" not in body["autoscaling"]
    assert body["config"]["flexStart"] is True

    np = client.get_node_pool(name=f"{cluster}/nodePools/dws-pool")
    assert np.config.flex_start
    assert np.queued_provisioning.enabled
    assert np.placement_policy.tpu_topology == "4x4"
    assert np.upgrade_settings.strategy == c.NodePoolUpdateStrategy.SHORT_LIVED
    assert not np.management.auto_repair and np.management.auto_upgrade
    assert [(t.key, t.value, t.effect) for t in np.config.taints] == [
        ("cloud.google.com/gke-queued", "true", c.NodeTaint.Effect.NO_SCHEDULE)]
    labels = np.config.resource_labels
    assert labels["goog-gke-node-pool-provisioning-model"] == "flex-start"
    assert labels["goog-gke-accelerator-type"] == "tpu-v6e-slice"
    assert (np.config.reservation_affinity.consume_reservation_type
            == c.ReservationAffinity.Type.NO_RESERVATION)
    names = [p.name for p in client.list_node_pools(parent=cluster).node_pools]
    assert names == ["default-pool", "dws-pool"]


def test_raw_json_enums_int64_and_zero_values(emulator, cluster):
    path = f"/v1/{cluster}/nodePools/dws-pool"
    status, names = emulator.raw("GET", path)
    assert status == 200
    assert names["status"] == "RUNNING"
    assert names["config"]["reservationAffinity"]["consumeReservationType"] == "NO_RESERVATION"
    status, ints = emulator.raw("GET", path, query="?%24alt=json%3Benum-encoding%3Dint")
    assert ints["status"] == 2
    assert ints["config"]["reservationAffinity"]["consumeReservationType"] == 1
    assert ints["upgradeSettings"]["strategy"] == 5  # SHORT_LIVED
    assert names["maxPodsConstraint"]["maxPodsPerNode"] == "110"  # int64 as a string
    assert names["config"]["diskSizeGb"] == 100  # int32 as a number
    assert "initialNodeCount" not in names  # zero: omitted
    assert "minNodeCount" not in names["autoscaling"]
    assert "autoRepair" not in names["management"]  # false: omitted
    assert names["config"]["flexStart"] is True


def test_update_and_set_autoscaling(client, cluster):
    pool_name = f"{cluster}/nodePools/dws-pool"
    op = client.set_node_pool_autoscaling(request=c.SetNodePoolAutoscalingRequest(
        name=pool_name,
        autoscaling=c.NodePoolAutoscaling(enabled=True, min_node_count=0, max_node_count=8)))
    wait(client, op)
    assert client.get_node_pool(name=pool_name).autoscaling.max_node_count == 8

    op = client.update_cluster(name=cluster, update=c.ClusterUpdate(
        desired_node_pool_id="dws-pool",
        desired_node_pool_autoscaling=c.NodePoolAutoscaling(enabled=True, max_node_count=4)))
    wait(client, op)
    assert client.get_node_pool(name=pool_name).autoscaling.max_node_count == 4

    np = client.get_node_pool(name=pool_name)
    op = client.update_node_pool(request=c.UpdateNodePoolRequest(
        name=pool_name, etag=np.etag,
        resource_labels=c.ResourceLabels(labels={"team": "ml"})))
    wait(client, op)
    np2 = client.get_node_pool(name=pool_name)
    assert np2.config.resource_labels["team"] == "ml"
    assert np2.config.resource_labels["goog-gke-accelerator-type"] == "tpu-v6e-slice"
    assert np2.etag != np.etag
    with pytest.raises(exceptions.Conflict):  # stale etag: 409 ABORTED
        client.update_node_pool(request=c.UpdateNodePoolRequest(
            name=pool_name, etag=np.etag, labels=c.NodeLabels(labels={"a": "b"})))

    got = client.get_cluster(name=cluster)
    op = client.set_labels(request=c.SetLabelsRequest(
        name=cluster, resource_labels={"managed-by": "gkq"},
        label_fingerprint=got.label_fingerprint))
    wait(client, op)
    got2 = client.get_cluster(name=cluster)
    assert dict(got2.resource_labels) == {"managed-by": "gkq"}
    assert got2.label_fingerprint != got.label_fingerprint
    with pytest.raises(exceptions.Conflict):
        client.set_labels(request=c.SetLabelsRequest(
            name=cluster, resource_labels={}, label_fingerprint=got.label_fingerprint))

    op = client.set_node_pool_size(request=c.SetNodePoolSizeRequest(
        name=f"{cluster}/nodePools/default-pool", node_count=1))
    wait(client, op)
    assert client.get_cluster(name=cluster).current_node_count == 1


def test_errors(client, emulator, cluster):
    with pytest.raises(exceptions.BadRequest) as e:
        client.update_cluster(name=cluster, update=c.ClusterUpdate())
    assert "Must specify a field to update." in str(e.value)
    with pytest.raises(exceptions.BadRequest) as e:
        client.update_cluster(name=cluster, update=c.ClusterUpdate(
            desired_node_pool_autoscaling=c.NodePoolAutoscaling(enabled=True, max_node_count=3)))
    assert "Node pool id must be specified" in str(e.value)
    with pytest.raises(exceptions.NotFound):
        client.get_cluster(name=f"{PARENT}/clusters/missing")
    with pytest.raises(exceptions.NotFound):
        client.get_operation(name=f"{PARENT}/operations/operation-0-nope")
    # Unknown fields are rejected the way Google's front end words it.
    status, body = emulator.raw("POST", f"/v1/{PARENT}/clusters", {"cluster": {"nmae": "x"}})
    assert status == 400
    assert body["error"]["status"] == "INVALID_ARGUMENT"
    assert body["error"]["message"] == (
        "Invalid JSON payload received. Unknown name \"nmae\" at 'cluster': Cannot find field.")
    status, body = emulator.raw("POST", f"/v1/{PARENT}/clusters", None)
    assert status == 400 and body["error"]["code"] == 400
    status, body = emulator.raw("GET", "/v1/nonsense")
    assert status == 404 and body["error"]["status"] == "NOT_FOUND"


def test_one_operation_per_cluster(client, cluster):
    op = client.set_node_pool_size(request=c.SetNodePoolSizeRequest(
        name=f"{cluster}/nodePools/default-pool", node_count=2))
    with pytest.raises(exceptions.BadRequest) as e:
        client.set_node_pool_autoscaling(request=c.SetNodePoolAutoscalingRequest(
            name=f"{cluster}/nodePools/dws-pool",
            autoscaling=c.NodePoolAutoscaling(enabled=True, max_node_count=5)))
    assert e.value.code == 400
    assert e.value.reason == "CLUSTER_ALREADY_HAS_OPERATION"
    assert f"Cluster is running incompatible operation {op.name}." in e.value.message
    wait(client, op)
    wait(client, client.set_node_pool_autoscaling(request=c.SetNodePoolAutoscalingRequest(
        name=f"{cluster}/nodePools/dws-pool",
        autoscaling=c.NodePoolAutoscaling(enabled=True, max_node_count=5))))


def test_faults(client, emulator, cluster):
    emulator.add_fault({"method": "POST", "path": "*/nodePools",
                        "fault": {"type": "stockout"}, "times": 1})
    op = client.create_node_pool(parent=cluster, node_pool=dws_pool("stocked-out"))
    done, _ = wait(client, op)
    assert done.error.code == 8
    assert "GCE_STOCKOUT" in done.error.message
    assert done.status_message == done.error.message
    assert done.nodepool_conditions[0].code == c.StatusCondition.Code.GCE_STOCKOUT
    np = client.get_node_pool(name=f"{cluster}/nodePools/stocked-out")
    assert np.status == c.NodePool.Status.ERROR

    emulator.add_fault({"method": "POST", "path": "*/nodePools",
                        "fault": {"type": "quota_exceeded"}, "times": 1})
    with pytest.raises(exceptions.Forbidden):
        client.create_node_pool(parent=cluster, node_pool=dws_pool("quota"))

    emulator.add_fault({"method": "POST", "path": "*/nodePools",
                        "fault": {"type": "tpu_flex_start_queued"}, "times": 1})
    with pytest.raises(exceptions.BadRequest) as e:
        client.create_node_pool(parent=cluster, node_pool=dws_pool("tpu-queued"))
    assert "Flex start node pools don't support TPUs with queued provisioning." in str(e.value)
    emulator.clear_faults()


def test_delete(client):
    wait(client, client.create_cluster(parent=PARENT, cluster=seed_cluster("doomed")))
    op = client.delete_cluster(name=f"{PARENT}/clusters/doomed")
    assert op.operation_type == c.Operation.Type.DELETE_CLUSTER
    assert client.get_cluster(name=f"{PARENT}/clusters/doomed").status == c.Cluster.Status.STOPPING
    wait(client, op)
    with pytest.raises(exceptions.NotFound):
        client.get_cluster(name=f"{PARENT}/clusters/doomed")


def _refused(client, cluster, pool, text):
    with pytest.raises(exceptions.BadRequest) as e:
        client.create_node_pool(parent=cluster, node_pool=pool)
    assert text in str(e.value), str(e.value)


def test_dws_pool_rules(client, emulator, cluster):
    """Flex-start and queued provisioning: autoscaling from zero, no reservation, no Spot, and
    (flex-start) no auto-repair. Each broken rule is a 400 INVALID_ARGUMENT and creates nothing."""
    # Flex-start with auto-repair on.
    pool = dws_pool("dws-repair")
    pool.management.auto_repair = True
    _refused(client, cluster, pool, "require node auto-repair to be disabled")
    # ANY_RESERVATION.
    pool = dws_pool("dws-any")
    pool.config.reservation_affinity.consume_reservation_type = (
        c.ReservationAffinity.Type.ANY_RESERVATION)
    _refused(client, cluster, pool, "require reservation affinity NO_RESERVATION")
    # Spot.
    pool = dws_pool("dws-spot")
    pool.config.spot = True
    _refused(client, cluster, pool, "cannot use Spot or preemptible VMs")
    # A static size (no autoscaling), flex-start alone.
    pool = dws_pool("dws-static")
    pool.queued_provisioning = c.NodePool.QueuedProvisioning(enabled=False)
    pool.autoscaling = c.NodePoolAutoscaling(enabled=False)
    pool.initial_node_count = 2
    _refused(client, cluster, pool, "Flex-start node pools require autoscaling to be enabled")
    # Queued provisioning without autoscaling, and with a minimum above zero.
    pool = dws_pool("queued-static")
    pool.config.flex_start = False
    pool.autoscaling = c.NodePoolAutoscaling(enabled=False)
    _refused(client, cluster, pool,
             "Node pools with queued provisioning require autoscaling to be enabled")
    pool = dws_pool("queued-min")
    pool.config.flex_start = False
    pool.autoscaling = c.NodePoolAutoscaling(enabled=True, min_node_count=1, max_node_count=4)
    _refused(client, cluster, pool, "require a minimum node count of 0")
    names = [p.name for p in client.list_node_pools(parent=cluster).node_pools]
    refused = {"dws-repair", "dws-any", "dws-spot", "dws-static", "queued-static", "queued-min"}
    assert not refused & set(names), names
    # The raw status, as any client sees it.
    status, body = emulator.raw("POST", f"/v1/{cluster}/nodePools", {"nodePool": {
        "name": "dws-raw", "config": {"machineType": "ct6e-standard-4t", "flexStart": True},
        "autoscaling": {"enabled": True, "maxNodeCount": 4},
        "management": {"autoRepair": True}}})
    assert status == 400 and body["error"]["status"] == "INVALID_ARGUMENT"


def test_dws_pool_rules_on_updates(client, cluster):
    """Turning autoscaling off on a DWS pool, or auto-repair on on a flex-start pool, is refused."""
    name = f"{cluster}/nodePools/dws-upd"
    wait(client, client.create_node_pool(parent=cluster, node_pool=dws_pool("dws-upd")))
    with pytest.raises(exceptions.BadRequest) as e:
        client.set_node_pool_autoscaling(request=c.SetNodePoolAutoscalingRequest(
            name=name, autoscaling=c.NodePoolAutoscaling(enabled=False)))
    assert "require autoscaling to be enabled" in str(e.value)
    with pytest.raises(exceptions.BadRequest) as e:
        client.set_node_pool_management(request=c.SetNodePoolManagementRequest(
            name=name, management=c.NodeManagement(auto_repair=True, auto_upgrade=True)))
    assert "require node auto-repair to be disabled" in str(e.value)
    np = client.get_node_pool(name=name)
    assert np.autoscaling.enabled and not np.management.auto_repair


def test_durations_are_seconds_with_an_s(emulator, cluster):
    """proto3 JSON writes google.protobuf.Duration as "21600s"; "6h" and 3600 are refused."""
    for bad in ["6h", 3600, "21600"]:
        status, body = emulator.raw("POST", f"/v1/{cluster}/nodePools", {"nodePool": {
            "name": "dur", "config": {"machineType": "n2-standard-4", "maxRunDuration": bad}}})
        assert status == 400, (bad, body)
        assert body["error"]["message"].startswith(
            "Invalid value at 'node_pool.config.max_run_duration' "
            "(type.googleapis.com/google.protobuf.Duration)"), body


def _send_newer_fields(client, method, path, body):
    """google-cloud-container's descriptors (2.67.0, its newest release) predate discovery
    revision 20261027, so its typed requests cannot carry fields added since. This sends the
    JSON through the client's own REST session and host, with the query the client adds, and
    decodes the answer as the client would, as an Operation."""
    transport = client._transport
    response = transport._session.request(
        method, f"{transport._host}/v1/{path}", json=body,
        params={"$alt": "json;enum-encoding=int"})
    assert response.status_code == 200, response.text
    return c.Operation.from_json(response.content, ignore_unknown_fields=True)


def test_fields_newer_than_the_clients_protos(client, emulator, cluster):
    pool = {"name": "autopilot-pool", "initialNodeCount": 1,
            "config": {"machineType": "n2-standard-4"},
            "autopilotConfig": {"enabled": True}}
    op = _send_newer_fields(client, "POST", f"{cluster}/nodePools", {"nodePool": pool})
    wait(client, op)
    name = f"{cluster}/nodePools/autopilot-pool"
    # The client still reads the pool (it skips the field it does not know) ...
    assert client.get_node_pool(name=name).config.machine_type == "n2-standard-4"
    # ... and the field comes back as sent.
    status, got = emulator.raw("GET", f"/v1/{name}")
    assert status == 200
    assert got["autopilotConfig"] == {"enabled": True}

    for mode, team in [("LIVE_UPDATE_WITHOUT_DRAIN", "ml"), (1, "ai")]:
        op = _send_newer_fields(client, "PUT", name, {
            "nodeConfigUpdateMode": mode, "labels": {"labels": {"team": team}}})
        wait(client, op)
        assert client.get_node_pool(name=name).config.labels["team"] == team

    status, err = emulator.raw("PUT", f"/v1/{name}", {"nodeConfigUpdateMode": "NOPE",
                                                      "labels": {"labels": {}}})
    assert status == 400
    assert "NodeConfigUpdateMode" in err["error"]["message"]
    op = client.delete_node_pool(name=name)
    wait(client, op)


# The capacity ladder (docs/gke-facts.md, "L8. What the GKE API refuses"): the settings its rungs
# need, sent with the official client's own types, and the combinations GKE refuses.

RESERVATION_KEY = "compute.googleapis.com/reservation-name"


def tpu_pool(name, **config):
    """A TPU v6e 4x4 pool of the ladder, on-demand unless `config` says otherwise."""
    return c.NodePool(
        name=name,
        config=c.NodeConfig(
            machine_type="ct6e-standard-4t",
            reservation_affinity=c.ReservationAffinity(
                consume_reservation_type=c.ReservationAffinity.Type.NO_RESERVATION),
            **config),
        autoscaling=c.NodePoolAutoscaling(enabled=True, max_node_count=4),
        placement_policy=c.NodePool.PlacementPolicy(tpu_topology="4x4"))


def reserved_pool(name, *values):
    pool = tpu_pool(name)
    pool.config.reservation_affinity = c.ReservationAffinity(
        consume_reservation_type=c.ReservationAffinity.Type.SPECIFIC_RESERVATION,
        key=RESERVATION_KEY, values=list(values))
    return pool


def flex_pool(name, queued=False, days=3):
    pool = tpu_pool(name, flex_start=True, max_run_duration=timedelta(days=days))
    pool.management = c.NodeManagement(auto_repair=False, auto_upgrade=True)
    if queued:
        pool.queued_provisioning = c.NodePool.QueuedProvisioning(enabled=True)
    return pool


def limits(**maxima):
    return [c.ResourceLimit(resource_type=k.replace("_", "-"), maximum=v) for k, v in maxima.items()]


def nap(**maxima):
    return c.ClusterAutoscaling(enable_node_autoprovisioning=True, resource_limits=limits(**maxima))


def versioned_cluster(name, version, **fields):
    cluster = seed_cluster(name)
    cluster.initial_cluster_version = version
    for k, v in fields.items():
        setattr(cluster, k, v)
    return cluster


@pytest.fixture(scope="module")
def ladder(client):
    """A 1.34 cluster with node auto-provisioning, and a 1.32 one (below flex-start's TPU floor)."""
    wait(client, client.create_cluster(parent=PARENT, cluster=versioned_cluster(
        "ladder", "1.34", autoscaling=nap(cpu=720, memory=2880, tpu_v6e_slice=48))))
    wait(client, client.create_cluster(parent=PARENT, cluster=versioned_cluster("old", "1.32")))
    return f"{PARENT}/clusters/ladder"


def status_of(error):
    """The google.rpc status name of a refused call (the exception class only says the HTTP status)."""
    return error.response.json()["error"]["status"]


def test_ladder_cluster_autoscaling(client, ladder):
    got = client.get_cluster(name=ladder).autoscaling
    assert got.enable_node_autoprovisioning
    assert [(r.resource_type, r.maximum) for r in got.resource_limits] == [
        ("cpu", 720), ("memory", 2880), ("tpu-v6e-slice", 48)]
    wait(client, client.update_cluster(name=ladder, update=c.ClusterUpdate(
        desired_cluster_autoscaling=nap(cpu=1000, memory=4000))))
    got = client.get_cluster(name=ladder).autoscaling
    assert [(r.resource_type, r.maximum) for r in got.resource_limits] == [
        ("cpu", 1000), ("memory", 4000)]
    # Turning auto-provisioning on needs a maximum for both cpu and memory.
    bare = c.ClusterAutoscaling(enable_node_autoprovisioning=True)
    for bad, missing in [(nap(cpu=8), "memory"), (nap(memory=64), "cpu"), (bare, "cpu, memory")]:
        with pytest.raises(exceptions.BadRequest) as e:
            client.create_cluster(parent=PARENT, cluster=versioned_cluster("nap-bad", "1.34", autoscaling=bad))
        assert f"missing: {missing}" in e.value.message, e.value.message
        assert status_of(e.value) == "INVALID_ARGUMENT"
        if bad is bare:
            continue  # an update that names no limits keeps the cluster's (below)
        with pytest.raises(exceptions.BadRequest) as e:
            client.update_cluster(name=ladder, update=c.ClusterUpdate(desired_cluster_autoscaling=bad))
        assert f"missing: {missing}" in e.value.message, e.value.message
    with pytest.raises(exceptions.NotFound):
        client.get_cluster(name=f"{PARENT}/clusters/nap-bad")
    wait(client, client.update_cluster(name=ladder, update=c.ClusterUpdate(
        desired_cluster_autoscaling=bare)))
    assert client.get_cluster(name=ladder).autoscaling.resource_limits[0].maximum == 1000


def test_ladder_pools_are_accepted_and_read_back(client, emulator, ladder):
    pools = [
        reserved_pool("reserved", "projects/capacity-project/reservations/tpu-v6e-res"),
        reserved_pool("reserved-here", "tpu-v6e-res"),
        tpu_pool("on-demand"),
        flex_pool("flex-vms"),
        flex_pool("dws", queued=True),
        tpu_pool("spot", spot=True),
    ]
    for pool in pools:
        wait(client, client.create_node_pool(parent=ladder, node_pool=pool))
    get = lambda n: client.get_node_pool(name=f"{ladder}/nodePools/{n}")
    affinity = get("reserved").config.reservation_affinity
    assert affinity.consume_reservation_type == c.ReservationAffinity.Type.SPECIFIC_RESERVATION
    assert affinity.key == RESERVATION_KEY
    assert list(affinity.values) == ["projects/capacity-project/reservations/tpu-v6e-res"]
    assert list(get("reserved-here").config.reservation_affinity.values) == ["tpu-v6e-res"]
    dws = get("dws")
    assert dws.config.flex_start and dws.queued_provisioning.enabled
    assert dws.config.max_run_duration == timedelta(days=3)
    assert dws.placement_policy.tpu_topology == "4x4"
    assert get("flex-vms").config.resource_labels["goog-gke-node-pool-provisioning-model"] == "flex-start"
    spot = get("spot")
    assert spot.config.spot
    assert spot.config.resource_labels["goog-gke-node-pool-provisioning-model"] == "spot"
    # The wire carried the Duration as proto3 JSON seconds.
    status, raw = emulator.raw("GET", f"/v1/{ladder}/nodePools/dws")
    assert raw["config"]["maxRunDuration"] == "259200s"


def _set(pool, **fields):
    """`pool` with config fields (or, for `queued`/`initial`, pool fields) changed."""
    for k, v in fields.items():
        if k == "queued":
            pool.queued_provisioning = c.NodePool.QueuedProvisioning(enabled=v)
        elif k == "initial":
            pool.initial_node_count = v
        elif k == "autoscaling":
            pool.autoscaling = v
        elif k == "topology":
            pool.placement_policy = c.NodePool.PlacementPolicy(tpu_topology=v)
        else:
            setattr(pool.config, k, v)
    return pool


SPECIFIC = c.ReservationAffinity(
    consume_reservation_type=c.ReservationAffinity.Type.SPECIFIC_RESERVATION,
    key=RESERVATION_KEY, values=["tpu-v6e-res"])

REFUSED_POOLS = [
    ("spot+flex-start", "ladder", lambda: _set(flex_pool("x"), spot=True),
     "INVALID_ARGUMENT", "cannot use Spot"),
    ("spot+queued", "ladder", lambda: _set(flex_pool("x", queued=True), spot=True),
     "INVALID_ARGUMENT", "cannot use Spot"),
    ("queued+specific-reservation", "ladder",
     lambda: _set(flex_pool("x", queued=True), reservation_affinity=SPECIFIC),
     "INVALID_ARGUMENT", "NO_RESERVATION, not SPECIFIC_RESERVATION"),
    ("queued+any-reservation", "ladder",
     lambda: _set(flex_pool("x", queued=True), reservation_affinity=c.ReservationAffinity(
         consume_reservation_type=c.ReservationAffinity.Type.ANY_RESERVATION)),
     "INVALID_ARGUMENT", "NO_RESERVATION, not ANY_RESERVATION"),
    ("queued-without-autoscaling", "ladder",
     lambda: _set(flex_pool("x", queued=True), autoscaling=c.NodePoolAutoscaling(enabled=False)),
     "INVALID_ARGUMENT", "require autoscaling to be enabled"),
    ("queued-with-initial-nodes", "ladder", lambda: _set(flex_pool("x", queued=True), initial=4),
     "INVALID_ARGUMENT", "initial_node_count must be 0"),
    ("queued-with-minimum", "ladder", lambda: _set(flex_pool("x", queued=True),
     autoscaling=c.NodePoolAutoscaling(enabled=True, min_node_count=4, max_node_count=4)),
     "INVALID_ARGUMENT", "minimum node count of 0"),
    ("specific-without-values", "ladder", lambda: reserved_pool("x"),
     "INVALID_ARGUMENT", "must name the reservation"),
    ("specific-without-key", "ladder", lambda: _set(reserved_pool("x", "r"),
     reservation_affinity=c.ReservationAffinity(
         consume_reservation_type=c.ReservationAffinity.Type.SPECIFIC_RESERVATION, values=["r"])),
     "INVALID_ARGUMENT", "must name the reservation"),
    ("reservation-path-without-name", "ladder",
     lambda: reserved_pool("x", "projects/capacity-project/reservations/"),
     "INVALID_ARGUMENT", "Invalid reservation"),
    ("reservation-not-a-name", "ladder", lambda: reserved_pool("x", "Capacity_Res"),
     "INVALID_ARGUMENT", "Invalid reservation"),
    ("flex-start-over-7-days", "ladder", lambda: flex_pool("x", days=8),
     "INVALID_ARGUMENT", "at most 604800s"),
    ("flex-start-on-tpu-v4", "ladder",
     lambda: _set(flex_pool("x"), machine_type="ct4p-hightpu-4t", topology="2x2x2"),
     "INVALID_ARGUMENT", "Flex-start does not support TPU v4"),
    ("topology-not-for-machine", "ladder", lambda: _set(tpu_pool("x"), machine_type="ct6e-standard-8t"),
     "INVALID_ARGUMENT", 'Invalid TPU topology "4x4"'),
    ("topology-on-cpu-machine", "ladder", lambda: _set(tpu_pool("x"), machine_type="n2-standard-8"),
     "INVALID_ARGUMENT", "only be set on a TPU machine type"),
    ("tpu-flex-start-below-floor", "old", lambda: flex_pool("x"),
     "FAILED_PRECONDITION", "1.33.0-gke.1712000 or later"),
    ("tpu-queued-below-floor", "old", lambda: flex_pool("x", queued=True),
     "FAILED_PRECONDITION", "1.33.0-gke.1712000 or later"),
]


@pytest.mark.parametrize("cluster_name,make,status,text",
                         [r[1:] for r in REFUSED_POOLS], ids=[r[0] for r in REFUSED_POOLS])
def test_ladder_refusals(client, ladder, cluster_name, make, status, text):
    parent = f"{PARENT}/clusters/{cluster_name}"
    with pytest.raises(exceptions.BadRequest) as e:
        client.create_node_pool(parent=parent, node_pool=make())
    assert text in e.value.message, e.value.message
    assert status_of(e.value) == status
    with pytest.raises(exceptions.NotFound):
        client.get_node_pool(name=f"{parent}/nodePools/x")


def test_ladder_refusals_on_updates(client, ladder):
    """A mutation cannot reach what a create is refused: every path checks the pool as it would be."""
    wait(client, client.create_node_pool(parent=ladder, node_pool=tpu_pool("spot-upd", spot=True)))
    wait(client, client.create_node_pool(parent=ladder, node_pool=flex_pool("dws-upd2", queued=True)))
    spot, dws = f"{ladder}/nodePools/spot-upd", f"{ladder}/nodePools/dws-upd2"
    calls = [
        (lambda: client.update_node_pool(request=c.UpdateNodePoolRequest(name=spot, flex_start=True)),
         "INVALID_ARGUMENT", "cannot use Spot"),
        (lambda: client.update_node_pool(request=c.UpdateNodePoolRequest(
            name=dws, max_run_duration=timedelta(days=9))), "INVALID_ARGUMENT", "at most 604800s"),
        (lambda: client.update_node_pool(request=c.UpdateNodePoolRequest(
            name=dws, node_version="1.32")), "FAILED_PRECONDITION", "1.33.0-gke.1712000"),
        (lambda: client.set_node_pool_autoscaling(request=c.SetNodePoolAutoscalingRequest(
            name=dws, autoscaling=c.NodePoolAutoscaling(enabled=True, min_node_count=1, max_node_count=4))),
         "INVALID_ARGUMENT", "minimum node count of 0"),
        (lambda: client.update_cluster(name=ladder, update=c.ClusterUpdate(
            desired_node_pool_id="dws-upd2",
            desired_node_pool_autoscaling=c.NodePoolAutoscaling(enabled=False))),
         "INVALID_ARGUMENT", "require autoscaling to be enabled"),
        (lambda: client.update_cluster(name=ladder, update=c.ClusterUpdate(
            desired_node_pool_id="dws-upd2", desired_node_version="1.32")),
         "FAILED_PRECONDITION", "1.33.0-gke.1712000"),
    ]
    before = client.get_node_pool(name=dws)
    for call, status, text in calls:
        with pytest.raises(exceptions.BadRequest) as e:
            call()
        assert text in e.value.message, e.value.message
        assert status_of(e.value) == status
    after = client.get_node_pool(name=dws)
    assert after.etag == before.etag and after.version == before.version
    assert not client.get_node_pool(name=spot).config.flex_start
