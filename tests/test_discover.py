"""Node discovery: flags/env, cloud metadata only on the cloud DMI names, budgets, garbage refused, record
forms."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from slurm_topo import InputError, load_inventories, parse_inventory
from slurm_topo.core.model import Location, Source
from slurm_topo.sources.discover import MetadataError, detect_cloud, discover_node, record_json, record_yaml

REAL_VM = Path(__file__).parent / "fixtures" / "real" / "h200-vm-1gpu"

TRICKLE = 299  # a status the fake answers with 200 and its body trickled, a byte every 0.05 s

# A handler gets (method, path, headers) and returns (status, body) or None to hang.
Answer = Callable[[str, str, dict[str, str]], "tuple[int, bytes] | None"]


class FakeMetadata:
    """A metadata server on 127.0.0.1:<free port> that records every request it receives."""

    def __init__(self, answer: Answer):
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.release = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                headers = {k: v for k, v in self.headers.items()}
                fake.requests.append((self.command, self.path, headers))
                result = answer(self.command, self.path, headers)
                if result is None:  # hang until the test is over
                    fake.release.wait(10)
                    return
                status, body = result
                self.send_response(200 if status == TRICKLE else status)
                if status == TRICKLE:  # headers, then the body a byte every 0.05 s
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    for i in range(len(body)):
                        if fake.release.wait(0.05):
                            return
                        self.wfile.write(body[i : i + 1])
                        self.wfile.flush()
                    return
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_PUT = _any

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake() -> Iterator[Callable[[Answer], FakeMetadata]]:
    servers: list[FakeMetadata] = []

    def start(answer: Answer) -> FakeMetadata:
        servers.append(FakeMetadata(answer))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def dmi(tmp_path: Path, **files: str) -> Path:
    root = tmp_path / "dmi"
    root.mkdir()
    for name, text in files.items():
        (root / name).write_text(text + "\n")
    return root


GCE_DMI = {"product_name": "Google Compute Engine", "sys_vendor": "Google"}
AWS_DMI = {"product_name": "p5.48xlarge", "sys_vendor": "Amazon EC2"}
AZURE_DMI = {"sys_vendor": "Microsoft Corporation", "chassis_asset_tag": "7783-7084-3265-9085-8269-3286-77"}
KVM_DMI = {"product_name": "Standard PC (Q35 + ICH9, 2009)", "sys_vendor": "QEMU"}
NOWHERE = Path("/nonexistent/dmi")


def gce_answer(zone_text: bytes) -> Answer:
    def answer(method: str, path: str, headers: dict[str, str]) -> tuple[int, bytes]:
        if headers.get("Metadata-Flavor") != "Google":
            return 403, b"Missing Metadata-Flavor:Google header."
        if method == "GET" and path == "/computeMetadata/v1/instance/zone":
            return 200, zone_text
        return 404, b"not found"

    return answer


TOKEN = "AQAEAKJ3hx9Xv7zC-fake-token=="


def aws_answer(values: dict[str, bytes]) -> Answer:
    """IMDSv2: PUT /latest/api/token with a TTL header gives a token; every GET without it is 401."""

    def answer(method: str, path: str, headers: dict[str, str]) -> tuple[int, bytes]:
        if path == "/latest/api/token":
            if method != "PUT" or "X-aws-ec2-metadata-token-ttl-seconds" not in headers:
                return 400, b""
            return 200, TOKEN.encode()
        if headers.get("X-aws-ec2-metadata-token") != TOKEN:
            return 401, b""
        key = path.removeprefix("/latest/meta-data/placement/")
        return (200, values[key]) if key in values else (404, b"")

    return answer


def azure_answer(doc: bytes) -> Answer:
    def answer(method: str, path: str, headers: dict[str, str]) -> tuple[int, bytes]:
        if headers.get("Metadata") != "true":
            return 400, b'{"error": "Bad request. Required metadata header not specified"}'
        if path == "/metadata/instance?api-version=2021-02-01":
            return 200, doc
        return 404, b""

    return answer


def test_gce_zone_from_metadata(tmp_path: Path, fake: Callable[[Answer], FakeMetadata]) -> None:
    """On GCE the zone's last path part is the zone, its region the region, and the header is sent."""
    srv = fake(gce_answer(b"projects/123456789/zones/europe-west1-b"))
    rec = discover_node(
        node_name="gpu-1",
        environ={},
        dmi_root=dmi(tmp_path, **GCE_DMI),
        gce_url=srv.url + "/computeMetadata/v1",
    )
    assert (rec.region, rec.zone, rec.network_group) == ("europe-west1", "europe-west1-b", None)
    assert dict(rec.found_by)["zone"] == "gce-metadata"
    assert [(m, p) for m, p, _ in srv.requests] == [("GET", "/computeMetadata/v1/instance/zone")]


def test_aws_imdsv2_token_first_then_placement(
    tmp_path: Path, fake: Callable[[Answer], FakeMetadata]
) -> None:
    """On AWS a token is PUT first and every GET carries it; the placement group becomes the network group."""
    srv = fake(
        aws_answer({"region": b"us-east-1", "availability-zone": b"us-east-1a", "group-name": b"pg-1"})
    )
    rec = discover_node(node_name="gpu-1", environ={}, dmi_root=dmi(tmp_path, **AWS_DMI), aws_url=srv.url)
    assert (rec.region, rec.zone, rec.network_group) == ("us-east-1", "us-east-1a", "pg-1")
    method, path, headers = srv.requests[0]
    assert (method, path) == (
        "PUT",
        "/latest/api/token",
    ) and "X-aws-ec2-metadata-token-ttl-seconds" in headers
    assert all(h.get("X-aws-ec2-metadata-token") == TOKEN for _, _, h in srv.requests[1:])
    assert len(srv.requests) == 4


def test_aws_fake_refuses_get_without_token(fake: Callable[[Answer], FakeMetadata]) -> None:
    """The fake behaves as IMDSv2: a GET without the token is 401 (so the test above proves the token is
    used)."""
    import urllib.error
    import urllib.request

    srv = fake(aws_answer({"region": b"us-east-1"}))
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with pytest.raises(urllib.error.HTTPError) as err:
        opener.open(srv.url + "/latest/meta-data/placement/region", timeout=2)
    err.value.close()
    assert err.value.code == 401


def test_aws_without_placement_group_has_no_network_group(
    tmp_path: Path, fake: Callable[[Answer], FakeMetadata]
) -> None:
    """group-name 404 (no placement group) is normal: region and zone, no network group, no error."""
    srv = fake(aws_answer({"region": b"eu-west-1", "availability-zone": b"eu-west-1c"}))
    rec = discover_node(node_name="n", environ={}, dmi_root=dmi(tmp_path, **AWS_DMI), aws_url=srv.url)
    assert (rec.region, rec.zone, rec.network_group) == ("eu-west-1", "eu-west-1c", None)


def test_aws_detected_by_hypervisor_uuid(tmp_path: Path, fake: Callable[[Answer], FakeMetadata]) -> None:
    """Xen EC2 instances without the DMI vendor are recognised by /sys/hypervisor/uuid starting with ec2."""
    srv = fake(aws_answer({"region": b"us-west-2", "availability-zone": b"us-west-2b"}))
    uuid = tmp_path / "uuid"
    uuid.write_text("ec2e1916-9099-7caf-fd21-012345abcdef\n")
    rec = discover_node(node_name="n", environ={}, dmi_root=NOWHERE, hypervisor_uuid=uuid, aws_url=srv.url)
    assert rec.zone == "us-west-2b"


def test_aws_hostile_placement_group_is_dropped_and_never_written(
    tmp_path: Path, fake: Callable[[Answer], FakeMetadata]
) -> None:
    """A placement group name that is no label is not used, and its text appears in no output."""
    srv = fake(
        aws_answer(
            {"region": b"us-east-1", "availability-zone": b"us-east-1a", "group-name": b"x\nnodes: evil"}
        )
    )
    rec = discover_node(node_name="n", environ={}, dmi_root=dmi(tmp_path, **AWS_DMI), aws_url=srv.url)
    assert rec.network_group is None
    assert "evil" not in record_yaml(rec) and "evil" not in record_json(rec)


def test_azure_location_and_zone(tmp_path: Path, fake: Callable[[Answer], FakeMetadata]) -> None:
    """On Azure the location is the region and the zone is recorded as <location>-<zone>."""
    doc = {
        "compute": {
            "location": "westeurope",
            "zone": "2",
            "name": "vm1",
            "vmSize": "Standard_ND96isr_H100_v5",
        }
    }
    srv = fake(azure_answer(json.dumps(doc).encode()))
    rec = discover_node(
        node_name="n", environ={}, dmi_root=dmi(tmp_path, **AZURE_DMI), azure_url=srv.url + "/metadata"
    )
    assert (rec.region, rec.zone) == ("westeurope", "westeurope-2")
    assert srv.requests[0][2].get("Metadata") == "true"


def test_azure_without_zone_gives_region_only(tmp_path: Path, fake: Callable[[Answer], FakeMetadata]) -> None:
    """A VM not in an availability zone (zone "") has a region and no zone."""
    srv = fake(azure_answer(b'{"compute": {"location": "northeurope", "zone": ""}}'))
    rec = discover_node(
        node_name="n", environ={}, dmi_root=dmi(tmp_path, **AZURE_DMI), azure_url=srv.url + "/metadata"
    )
    assert (rec.region, rec.zone) == ("northeurope", None)


@pytest.mark.parametrize("dmi_files", [KVM_DMI, {}, None], ids=["kvm", "empty-dmi", "no-dmi-folder"])
def test_not_this_cloud_sends_zero_requests(
    tmp_path: Path, fake: Callable[[Answer], FakeMetadata], dmi_files: dict[str, str] | None
) -> None:
    """With DMI naming no supported cloud, a recording server at every base URL receives zero requests."""
    srv = fake(lambda m, p, h: (200, b"projects/1/zones/europe-west1-b"))
    root = dmi(tmp_path, **dmi_files) if dmi_files is not None else tmp_path / "absent"
    rec = discover_node(
        node_name="n",
        environ={},
        dmi_root=root,
        hypervisor_uuid=tmp_path / "no-uuid",
        gce_url=srv.url,
        aws_url=srv.url,
        azure_url=srv.url,
    )
    assert srv.requests == []
    assert rec.region is None and any("nothing asked from the network" in n for n in rec.notes)


def test_real_h200_vm_capture_has_no_dmi_folder_and_that_is_normal(
    fake: Callable[[Answer], FakeMetadata],
) -> None:
    """The real H200 VM capture has no DMI folder: no error, no request, a note."""
    srv = fake(lambda m, p, h: (200, b""))
    rec = discover_node(
        node_name="h200",
        environ={},
        dmi_root=REAL_VM / "dmi",
        gce_url=srv.url,
        aws_url=srv.url,
        azure_url=srv.url,
        hypervisor_uuid=REAL_VM / "uuid",
    )
    assert srv.requests == [] and rec.region is None


class StepClock:
    """The clock injected into discover_node: ``times`` in turn, then the last one again and again; counts its
    reads."""

    def __init__(self, *times: float, step: float = 0.0):
        self.times, self.step, self.reads = list(times), step, 0

    def __call__(self) -> float:
        self.reads += 1
        if len(self.times) > 1:
            return self.times.pop(0)
        self.times[0] += self.step
        return self.times[0] - self.step


@pytest.mark.parametrize("cloud", ["gce", "aws", "azure"])
def test_hanging_server_is_waited_for_only_the_time_left_with_a_note(
    tmp_path: Path, fake: Callable[[Answer], FakeMetadata], cloud: str
) -> None:
    """A metadata server that never answers costs the time left on the budget, not more: the injected clock
    says 0.05 s of the 30 s budget are left when the request is made, so the socket waits 0.05 s and the
    record carries the budget's note. A client that waited longer (the whole budget, or no timeout) would meet
    the fake's own end at 10 s, a dropped connection, and another note."""
    srv = fake(lambda m, p, h: None)
    files = {"gce": GCE_DMI, "aws": AWS_DMI, "azure": AZURE_DMI}[cloud]
    clock = StepClock(100.0, 129.95)  # the deadline is 130; every later read leaves 0.05 s
    rec = discover_node(
        node_name="n",
        zone="hall-a",
        region="dc1",
        environ={},
        dmi_root=dmi(tmp_path, **files),
        gce_url=srv.url,
        aws_url=srv.url,
        azure_url=srv.url,
        budget_s=30.0,
        clock=clock,
    )
    assert [n for n in rec.notes if "metadata:" in n] == [
        f"{cloud} metadata: no answer within the time budget (budget 30 s); no location from metadata"
    ]
    assert (rec.region, rec.zone) == ("dc1", "hall-a")
    assert len(srv.requests) == 1 and clock.reads >= 3  # the deadline, the request, the wait for the answer


def test_trickling_server_is_cut_at_the_budget(
    tmp_path: Path, fake: Callable[[Answer], FakeMetadata]
) -> None:
    """A server that sends headers, then its answer a byte every 0.05 s, is cut when the budget is spent on
    the injected clock (each read of it 7 s later: the 30 s budget is over after four reads), with a note and
    no location. A client that read the body without its deadline would get the whole, valid, answer (a
    zone and its region) after 2.2 s."""
    answer = b"projects/123456789012/zones/europe-west1-b"
    srv = fake(lambda m, p, h: (TRICKLE, answer))
    clock = StepClock(0.0, step=7.0)
    rec = discover_node(
        node_name="n",
        environ={},
        dmi_root=dmi(tmp_path, **GCE_DMI),
        gce_url=srv.url,
        budget_s=30.0,
        clock=clock,
    )
    assert rec.region is None and rec.zone is None
    assert any("no answer within the time budget" in n for n in rec.notes), rec.notes
    assert len(srv.requests) == 1 and clock.reads == 6  # deadline, request, answer, 2 chunks, the cut


def test_refused_connection_is_a_note(tmp_path: Path) -> None:
    """Nothing listening on the metadata address: a note, not an error."""
    rec = discover_node(
        node_name="n", environ={}, dmi_root=dmi(tmp_path, **GCE_DMI), gce_url="http://127.0.0.1:9"
    )
    assert rec.region is None and any("no answer" in n for n in rec.notes)


@pytest.mark.parametrize(
    ("files", "answer"),
    [
        (GCE_DMI, gce_answer(b"<html>captive portal</html>")),
        (GCE_DMI, gce_answer(b"projects/1/zones/europe west1 b")),
        (GCE_DMI, gce_answer(b"projects/1/zones/" + b"a" * 70)),
        (GCE_DMI, gce_answer(b"\xff\xfe")),
        (AWS_DMI, aws_answer({"region": b"us-east-1", "availability-zone": b"eu-west-1a"})),
        (AWS_DMI, aws_answer({"region": b"us-east-1\n[evil]", "availability-zone": b"us-east-1a"})),
        (AZURE_DMI, azure_answer(b"not json")),
        (AZURE_DMI, azure_answer(b'{"compute": {"location": "west europe", "zone": "1"}}')),
        (AZURE_DMI, azure_answer(b'{"compute": {"location": "westeurope", "zone": "1;rm"}}')),
    ],
    ids=[
        "gce-html",
        "gce-spaces",
        "gce-too-long",
        "gce-not-utf8",
        "aws-zone-in-other-region",
        "aws-injection",
        "azure-not-json",
        "azure-bad-location",
        "azure-bad-zone",
    ],
)
def test_garbage_answer_is_a_clear_error_and_no_record(
    tmp_path: Path, fake: Callable[[Answer], FakeMetadata], files: dict[str, str], answer: Answer
) -> None:
    """A metadata answer that is not a valid location raises MetadataError (an InputError): no record is
    made."""
    srv = fake(answer)
    with pytest.raises(MetadataError) as err:
        discover_node(
            node_name="n",
            environ={},
            dmi_root=dmi(tmp_path, **files),
            gce_url=srv.url + "/computeMetadata/v1",
            aws_url=srv.url,
            azure_url=srv.url + "/metadata",
        )
    assert isinstance(err.value, InputError)
    assert "\n" not in str(err.value) and "no record made" in str(err.value)


def test_flags_win_over_env_and_env_over_metadata(
    tmp_path: Path, fake: Callable[[Answer], FakeMetadata]
) -> None:
    """Per level: flag, then GPULAYER_* env, then metadata; a disagreeing metadata value is noted and
    dropped."""
    srv = fake(gce_answer(b"projects/1/zones/europe-west1-b"))
    rec = discover_node(
        node_name="n",
        zone="europe-west1-c",
        environ={"GPULAYER_ZONE": "europe-west1-d", "GPULAYER_NETWORK_GROUP": "rack-7"},
        dmi_root=dmi(tmp_path, **GCE_DMI),
        gce_url=srv.url + "/computeMetadata/v1",
    )
    assert (rec.region, rec.zone, rec.network_group) == ("europe-west1", "europe-west1-c", "rack-7")
    fb = dict(rec.found_by)
    assert (fb["zone"], fb["network_group"], fb["region"]) == (
        "flag",
        "env:GPULAYER_NETWORK_GROUP",
        "gce-metadata",
    )
    assert any("zone: flag overrides gce-metadata" in n for n in rec.notes)


def test_all_levels_explicit_asks_no_metadata(tmp_path: Path, fake: Callable[[Answer], FakeMetadata]) -> None:
    """With region, zone and network group given, even a detected cloud is not asked."""
    srv = fake(gce_answer(b"projects/1/zones/europe-west1-b"))
    discover_node(
        node_name="n",
        region="r",
        zone="z",
        network_group="g",
        environ={},
        dmi_root=dmi(tmp_path, **GCE_DMI),
        gce_url=srv.url,
    )
    assert srv.requests == []


def test_name_order_flag_env_hostname() -> None:
    """The name is --node-name, else $SLURMD_NODENAME, else the short host name."""
    kw: dict[str, Any] = {"dmi_root": NOWHERE, "hostname": lambda: "gpu-07.cluster.example"}
    assert discover_node(environ={}, **kw).name == "gpu-07"
    assert discover_node(environ={"SLURMD_NODENAME": "slurm-7"}, **kw).name == "slurm-7"
    assert discover_node(node_name="flag-7", environ={"SLURMD_NODENAME": "slurm-7"}, **kw).name == "flag-7"


@pytest.mark.parametrize(
    "kwargs",
    [{"node_name": "bad name"}, {"zone": "zone a"}, {"region": "x" * 64}, {"region": "europe-west1-b"}],
)
def test_bad_explicit_values_are_input_errors(kwargs: dict[str, str]) -> None:
    """Explicit values are validated like inventory labels; a zone-shaped region is refused."""
    kwargs.setdefault("node_name", "n")
    with pytest.raises(InputError):
        discover_node(environ={}, dmi_root=NOWHERE, **kwargs)  # type: ignore[arg-type]


def test_bad_env_value_names_the_variable() -> None:
    """A bad GPULAYER_* value is an error naming the variable."""
    with pytest.raises(InputError, match="GPULAYER_REGION"):
        discover_node(node_name="n", environ={"GPULAYER_REGION": "a;b"}, dmi_root=NOWHERE)


def test_json_is_exactly_one_object_with_the_documented_keys() -> None:
    """--json prints one object: name, region, zone, network_group, source=self, found_by, notes."""
    rec = discover_node(node_name="n", region="dc1", zone="hall-a", environ={}, dmi_root=NOWHERE)
    text = record_json(rec)
    assert text.count("\n") == 1
    obj = json.loads(text)
    assert list(obj) == ["name", "region", "zone", "network_group", "source", "found_by", "notes"]
    assert obj["source"] == "self" and obj["network_group"] is None and isinstance(obj["found_by"], dict)


def test_yaml_record_loads_through_the_inventory_loader(tmp_path: Path) -> None:
    """The YAML form is a one-entry inventory: load_inventories reads it as a self record at the same
    place."""
    rec = discover_node(
        node_name="gpu-3",
        region="europe-west1",
        zone="europe-west1-b",
        network_group="rack-2",
        environ={},
        dmi_root=NOWHERE,
    )
    path = tmp_path / "gpu-3.yaml"
    path.write_text(record_yaml(rec))
    inv = load_inventories([path])
    (node,) = inv.nodes
    assert node.name == "gpu-3" and node.source == Source.SELF
    assert node.location == Location("europe-west1", "europe-west1-b", "rack-2")
    assert dict(node.found_by)["zone"] == "flag" and node.notes == rec.notes


def test_record_without_location_still_loads() -> None:
    """A record with no location (nothing found) is a valid inventory entry."""
    rec = discover_node(node_name="n", environ={}, dmi_root=NOWHERE)
    loaded = parse_inventory(record_yaml(rec))
    assert loaded.nodes[0].location == Location()


def test_detect_cloud_reads_local_files_only(tmp_path: Path) -> None:
    """detect_cloud names the cloud from DMI and says why."""
    assert detect_cloud(dmi(tmp_path, **GCE_DMI))[0] == "gce"
    assert detect_cloud(NOWHERE, tmp_path / "none") == (None, f"no DMI information ({NOWHERE} missing)")


def test_explicit_zone_outside_metadata_region_replaces_it(
    tmp_path: Path, fake: Callable[[Answer], FakeMetadata]
) -> None:
    """A flag zone naming another region than the metadata's: the region follows the zone, with a note."""
    srv = fake(gce_answer(b"projects/1/zones/europe-west1-b"))
    rec = discover_node(
        node_name="n",
        zone="us-central1-a",
        environ={},
        dmi_root=dmi(tmp_path, **GCE_DMI),
        gce_url=srv.url + "/computeMetadata/v1",
    )
    assert (rec.region, rec.zone) == ("us-central1", "us-central1-a")
    assert dict(rec.found_by)["region"] == "zone name" and any(
        "region: gce-metadata dropped" in n for n in rec.notes
    )


def test_explicit_zone_outside_explicit_region_is_an_error() -> None:
    """--region and --zone that disagree are refused."""
    with pytest.raises(InputError, match="is not in region"):
        discover_node(node_name="n", region="us-east-1", zone="eu-west-1a", environ={}, dmi_root=NOWHERE)


def test_operator_region_with_its_cloud_zone_is_accepted_as_inventories_accept_it() -> None:
    """`--region us-east --zone us-east-1a` (an operator's own region name over a cloud zone) is accepted, as
    the inventory loader accepts that pair (one rule: model.zone_in_region); two cloud names that disagree are
    not."""
    rec = discover_node(node_name="n", region="us-east", zone="us-east-1a", environ={}, dmi_root=NOWHERE)
    assert (rec.region, rec.zone) == ("us-east", "us-east-1a")
    doc = parse_inventory(record_yaml(rec))
    assert doc.nodes[0].location == Location("us-east", "us-east-1a")
    with pytest.raises(InputError, match="is not in region"):
        discover_node(node_name="n", region="us-east-1", zone="eu-west-1a", environ={}, dmi_root=NOWHERE)
    with pytest.raises(InputError, match="is not in region"):
        parse_inventory("nodes:\n  - {name: n, region: us-east-1, zone: eu-west-1a}\n")
