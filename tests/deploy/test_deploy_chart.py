"""The Helm chart: lint, render with several values files, validate every
manifest (core kinds with kubernetes-validate, RayCluster and SparkApplication
against the CRD schemas in helm/crd-schemas), and check what each values file
must produce."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from deploy_support import (
    CHART,
    VALUES_DIR,
    by_kind,
    env_of,
    one,
    pod_specs,
    render,
    run_helm,
    validate_manifest,
)

DEFAULT: list[Path] = []
SASL_TLS = [VALUES_DIR / "sasl-tls-3-workers.yaml"]
NO_SPARK = [VALUES_DIR / "no-spark-autoscaling.yaml"]
MTLS = [VALUES_DIR / "mtls-client-cert.yaml"]
GENERIC_SPARK = [VALUES_DIR / "generic-spark-jobs.yaml"]
VALUE_SETS = {"default": DEFAULT, "sasl-tls-3-workers": SASL_TLS,
              "no-spark-autoscaling": NO_SPARK, "mtls-client-cert": MTLS,
              "generic-spark-jobs": GENERIC_SPARK}
EXPECTED_KINDS = {
    "default": {"ServiceAccount": 1, "Role": 1, "RoleBinding": 1, "ConfigMap": 1,
                "RayCluster": 1, "Deployment": 1, "Service": 1, "SparkApplication": 2,
                "Job": 1},
    "sasl-tls-3-workers": {"ServiceAccount": 1, "Role": 1, "RoleBinding": 1, "ConfigMap": 1,
                           "RayCluster": 1, "Deployment": 1, "Service": 1,
                           "SparkApplication": 2, "Job": 1},
    "no-spark-autoscaling": {"RayCluster": 1, "Deployment": 1, "Service": 1},
    "mtls-client-cert": {"ServiceAccount": 1, "Role": 1, "RoleBinding": 1, "ConfigMap": 1,
                         "RayCluster": 1, "Deployment": 1, "Service": 1,
                         "SparkApplication": 1, "Job": 1},
    "generic-spark-jobs": {"ServiceAccount": 1, "Role": 1, "RoleBinding": 1, "ConfigMap": 1,
                           "RayCluster": 1, "Deployment": 1, "Service": 1,
                           "SparkApplication": 3, "Job": 1},
}


@pytest.fixture(scope="module")
def rendered(helm: Path) -> dict[str, list[dict[str, Any]]]:
    return {name: render(files) for name, files in VALUE_SETS.items()}


def all_containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every CAESAR container of a manifest (pods, init containers, Spark driver/executor)."""
    if doc["kind"] == "SparkApplication":
        return [doc["spec"]["driver"], doc["spec"]["executor"]]
    out: list[dict[str, Any]] = []
    for spec in pod_specs(doc):
        out += spec["containers"] + spec.get("initContainers", [])
    return out


@pytest.mark.parametrize("name", VALUE_SETS)
def test_helm_lint_strict(helm: Path, name: str) -> None:
    args = [a for f in VALUE_SETS[name] for a in ("-f", str(f))]
    proc = run_helm("lint", str(CHART), "--strict", *args)
    assert "0 chart(s) failed" in proc.stdout


@pytest.mark.parametrize("name", VALUE_SETS)
def test_every_rendered_manifest_is_valid(rendered: dict, name: str) -> None:
    docs = rendered[name]
    kinds: dict[str, int] = {}
    for doc in docs:
        kinds[doc["kind"]] = kinds.get(doc["kind"], 0) + 1
    assert kinds == EXPECTED_KINDS[name]
    problems = [str(p) for doc in docs for p in validate_manifest(doc)]
    assert problems == []


@pytest.mark.parametrize("k8s", ["1.27.0", "1.32.0", "1.37.0"])
def test_core_manifests_valid_on_every_supported_kubernetes(rendered: dict, k8s: str) -> None:
    """Chart.yaml says kubeVersion >=1.27: the core kinds validate from 1.27 to the
    newest Kubernetes kubernetes-validate knows."""
    import kubernetes_validate

    for name, docs in rendered.items():
        for doc in docs:
            if doc["kind"] in ("RayCluster", "SparkApplication"):
                continue
            try:
                kubernetes_validate.validate(doc, k8s, strict=True)
            except kubernetes_validate.ValidationError as err:
                pytest.fail(f"{name}: {doc['kind']}/{doc['metadata']['name']} on {k8s}: "
                            f"{'/'.join(map(str, err.path))}: {err.message}")


def test_default_values_run_the_example_model(rendered: dict) -> None:
    docs = rendered["default"]
    model = one(docs, "ConfigMap", "-model")["data"]["model.caesar"]
    assert model == (CHART / "files" / "model.caesar").read_text().rstrip("\n")
    cluster = one(docs, "RayCluster")
    assert cluster["spec"]["rayVersion"] == "2.60.0"
    assert cluster["spec"]["enableInTreeAutoscaling"] is False
    assert "upgradeStrategy" not in cluster["spec"]  # works with older KubeRay too
    (group,) = cluster["spec"]["workerGroupSpecs"]
    # Autoscaling off: the group is pinned at `replicas`.
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (2, 2, 2)
    head = cluster["spec"]["headGroupSpec"]["template"]["spec"]
    assert head["securityContext"]["runAsNonRoot"] is True
    mounts = {m["name"]: m["mountPath"] for m in head["containers"][0]["volumeMounts"]}
    assert mounts == {"model": "/model"}
    # The services' actors run at nice 0, not Ray's 15 (below the pod's other processes).
    for spec in (head, group["template"]["spec"]):
        assert env_of(spec["containers"][0])["RAY_worker_niceness"]["value"] == "0"

    driver = one(docs, "Deployment", "-driver")
    assert driver["spec"]["replicas"] == 1
    assert driver["spec"]["strategy"]["type"] == "Recreate"  # never two drivers at once
    pod = driver["spec"]["template"]["spec"]
    assert pod["containers"][0]["command"] == [
        "caesar", "deploy", "/model/model.caesar", "--ray-address",
        "ray://caesar-head-svc.streams.svc:10001", "--observe-host", "0.0.0.0",
        "--observe-port", "9464"]
    assert "caesar-head-svc.streams.svc:6379" in pod["initContainers"][0]["command"][2]
    # Metrics, probes and the live view on the driver's observe port.
    container = pod["containers"][0]
    assert container["ports"] == [{"name": "observe", "containerPort": 9464, "protocol": "TCP"}]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "observe"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/ready", "port": "observe"}
    annotations = driver["spec"]["template"]["metadata"]["annotations"]
    assert (annotations["prometheus.io/scrape"], annotations["prometheus.io/port"],
            annotations["prometheus.io/path"]) == ("true", "9464", "/metrics")
    service = one(docs, "Service", "-driver")
    assert service["spec"]["ports"][0]["targetPort"] == "observe"
    assert service["spec"]["selector"] == driver["spec"]["selector"]["matchLabels"]
    topics = one(docs, "Job", "-topics")
    # Topics before anything of the release starts or changes.
    assert topics["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert topics["spec"]["template"]["spec"]["containers"][0]["command"] == [
        "caesar", "topics", "--create", "--event-type", "PositionReport",
        "--store", "scheduler", "--store", "deriver", "--store", "router", "--store", "matcher"]
    assert "volumes" not in topics["spec"]["template"]["spec"]  # a pre-install hook mounts nothing of the release

    apps = {a["metadata"]["name"]: a for a in by_kind(docs, "SparkApplication")}
    assert set(apps) == {"caesar-producer", "caesar-alert-consumer"}
    assert apps["caesar-producer"]["spec"]["arguments"] == [
        "caesar.examples.linear_road.produce", "--bootstrap", "kafka:9092", "--topic",
        "caesar.input.PositionReport", "--generate", "xways=1,duration_s=10800", "--speed", "1"]
    assert apps["caesar-alert-consumer"]["spec"]["arguments"][:4] == [
        "caesar.examples.linear_road.consume_alerts", "--bootstrap", "kafka:9092", "--out"]
    for app in apps.values():
        driver_env = env_of(app["spec"]["driver"])
        assert driver_env["CAESAR_SPARK_MASTER"]["value"] == "k8s://https://kubernetes.default.svc:443"
        assert app["spec"]["mainApplicationFile"] == "local:///opt/caesar/bin/run_module.py"
        assert app["spec"]["sparkVersion"] == "4.3.0"
        assert app["spec"]["driver"]["serviceAccount"] == "caesar-spark"


def test_sasl_over_tls_with_three_workers(rendered: dict) -> None:
    docs = rendered["sasl-tls-3-workers"]
    cluster = one(docs, "RayCluster")
    assert cluster["spec"]["upgradeStrategy"] == {"type": "Recreate"}
    (group,) = cluster["spec"]["workerGroupSpecs"]
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (3, 3, 3)
    assert group["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "4"

    workloads = (by_kind(docs, "RayCluster") + by_kind(docs, "Job") + by_kind(docs, "Deployment")
                 + by_kind(docs, "SparkApplication"))
    checked = 0
    for doc in workloads:
        for container in all_containers(doc):
            if container.get("name") == "wait-for-ray":
                continue  # only talks to the Ray head
            env = env_of(container)
            assert env["CAESAR_KAFKA__SECURITY__PROTOCOL"]["value"] == "SASL_SSL"
            assert env["CAESAR_KAFKA__SECURITY__SASL_MECHANISM"]["value"] == "SCRAM-SHA-512"
            # Credentials only by reference to the Secret, never inline.
            assert env["CAESAR_KAFKA__SECURITY__SASL_USERNAME"]["valueFrom"]["secretKeyRef"] == {
                "name": "kafka-credentials", "key": "user"}
            assert env["CAESAR_KAFKA__SECURITY__SASL_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
                "name": "kafka-credentials", "key": "pass"}
            assert env["CAESAR_KAFKA__SECURITY__SSL_CA_LOCATION"]["value"] == "/etc/caesar/kafka-tls/ca.pem"
            assert env["CAESAR_KAFKA__SCHEMA_REGISTRY_URL"]["value"].startswith("https://")
            assert env["CAESAR_TOPICS__PARTITIONS"]["value"] == "12"
            assert json.loads(env["CAESAR_TOPICS__PARTITIONS_BY_TOPIC"]["value"]) == {
                "caesar.dead-letters": 1}
            mounts = {m["name"]: m for m in container["volumeMounts"]}
            assert mounts["kafka-tls"]["mountPath"] == "/etc/caesar/kafka-tls"
            assert mounts["kafka-tls"]["readOnly"] is True
            checked += 1
    # head + worker + topics job + driver + 2 x (Spark driver + executor)
    assert checked == 8
    for doc in by_kind(docs, "RayCluster") + by_kind(docs, "Job") + by_kind(docs, "Deployment"):
        for spec in pod_specs(doc):
            volumes = {v["name"]: v for v in spec["volumes"]}
            assert volumes["kafka-tls"]["secret"]["secretName"] == "kafka-ca"
            assert spec["imagePullSecrets"] == [{"name": "registry-credentials"}]
    producer = one(docs, "SparkApplication", "-producer")
    assert producer["spec"]["arguments"] == [
        "caesar.examples.linear_road.produce", "--bootstrap",
        "b-1.kafka.internal:9096,b-2.kafka.internal:9096,b-3.kafka.internal:9096",
        "--lr-file", "/data/lr.txt", "--speed", "0"]
    assert producer["spec"]["executor"]["instances"] == 2
    no_plain_secret = yaml.safe_dump_all(docs)
    assert "password:" not in no_plain_secret.lower()


def test_no_spark_autoscaling_existing_model(rendered: dict) -> None:
    docs = rendered["no-spark-autoscaling"]
    assert by_kind(docs, "SparkApplication") == []
    assert by_kind(docs, "ServiceAccount") == []
    assert by_kind(docs, "ConfigMap") == []  # the user's ConfigMap holds the model
    assert by_kind(docs, "Job") == []  # topics.create: false
    cluster = one(docs, "RayCluster")
    assert cluster["spec"]["enableInTreeAutoscaling"] is True
    assert cluster["spec"]["autoscalerOptions"]["upscalingMode"] == "Conservative"
    assert cluster["spec"]["autoscalerOptions"]["idleTimeoutSeconds"] == 120
    (group,) = cluster["spec"]["workerGroupSpecs"]
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (2, 1, 6)
    driver = one(docs, "Deployment", "-driver")
    assert driver["spec"]["template"]["metadata"]["annotations"]["caesar/model-configmap"] == "fraud-model"
    for spec in pod_specs(cluster) + pod_specs(driver):
        (model,) = [v for v in spec["volumes"] if v["name"] == "model"]
        assert model["configMap"] == {"name": "fraud-model",
                                      "items": [{"key": "fraud.caesar", "path": "model.caesar"}]}
    env = env_of(cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0])
    assert json.loads(env["CAESAR_TOPICS__INPUTS"]["value"]) == {"Payment": "payments", "Login": "logins"}
    assert env["CAESAR_TOPICS__ALERTS"]["value"] == "fraud.alerts"
    assert env["CAESAR_KAFKA__SECURITY__PROTOCOL"]["value"] == "PLAINTEXT"
    assert "CAESAR_KAFKA__SECURITY__SASL_PASSWORD" not in env


def test_mutual_tls_client_certificate(rendered: dict) -> None:
    docs = rendered["mtls-client-cert"]
    head = one(docs, "RayCluster")["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    env = env_of(head)
    assert env["CAESAR_KAFKA__SECURITY__PROTOCOL"]["value"] == "SSL"
    assert env["CAESAR_KAFKA__SECURITY__SSL_CERTIFICATE_LOCATION"]["value"] == "/etc/caesar/kafka-tls/tls.crt"
    assert env["CAESAR_KAFKA__SECURITY__SSL_KEY_LOCATION"]["value"] == "/etc/caesar/kafka-tls/tls.key"
    assert env["CAESAR_KAFKA__SECURITY__SSL_ENDPOINT_IDENTIFICATION_ALGORITHM"]["value"] == "none"
    assert "CAESAR_KAFKA__SECURITY__SASL_MECHANISM" not in env
    assert [a["metadata"]["name"] for a in by_kind(docs, "SparkApplication")] == ["caesar-producer"]


def _settings_from(container: dict[str, Any], monkeypatch: pytest.MonkeyPatch):
    """Load CAESAR's settings from a rendered container's environment (Secrets stubbed)."""
    from caesar.settings import load_settings

    for name in [n for n in __import__("os").environ if n.startswith("CAESAR_")]:
        monkeypatch.delenv(name)
    for name, item in env_of(container).items():
        value = item.get("value")
        if value is None:  # from a Secret: what the kubelet would inject
            value = f"<{item['valueFrom']['secretKeyRef']['key']}>"
        monkeypatch.setenv(name, value)
    return load_settings()


@pytest.mark.parametrize("name", VALUE_SETS)
def test_environment_matches_the_settings_contract(rendered: dict, name: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The CAESAR_* variables the chart sets are the ones src/caesar/settings.py reads."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    for f in VALUE_SETS[name]:
        overrides = yaml.safe_load(f.read_text())
        for section, content in overrides.items():
            if isinstance(content, dict) and isinstance(values.get(section), dict):
                for key, val in content.items():
                    if isinstance(val, dict) and isinstance(values[section].get(key), dict):
                        values[section][key] = {**values[section][key], **val}
                    else:
                        values[section][key] = val
            else:
                values[section] = content
    head = one(rendered[name], "RayCluster")["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    settings = _settings_from(head, monkeypatch)
    kafka, topics = values["kafka"], values["topics"]
    assert settings.kafka.bootstrap_servers == kafka["bootstrapServers"]
    assert settings.kafka.security.protocol == kafka["securityProtocol"]
    assert settings.kafka.client_id == "caesar"
    assert settings.kafka.schema_registry_url == (kafka["schemaRegistry"]["url"] or None)
    if kafka["securityProtocol"].startswith("SASL"):
        assert settings.kafka.security.sasl_mechanism == kafka["sasl"]["mechanism"]
        assert settings.kafka.security.sasl_password.get_secret_value() == f"<{kafka['sasl']['passwordKey']}>"
    assert settings.topics.inputs == topics["inputs"]
    assert settings.topics.alerts == topics["names"]["alerts"]
    assert settings.topics.context_changes == topics["names"]["contextChanges"]
    assert settings.topics.dead_letters == topics["names"]["deadLetters"]
    assert settings.topics.partitions == topics["partitions"]
    assert settings.topics.replication_factor == topics["replicationFactor"]
    assert settings.topics.retention_ms == topics["retentionMs"]
    assert settings.ray.namespace == values["ray"]["namespace"]
    assert settings.ray.actors_per_service == values["ray"]["actorsPerService"]
    assert settings.ray.actors == values["ray"]["actors"]


def test_model_from_set_file_and_upgrade_redeploys(helm: Path, tmp_path: Path) -> None:
    first, second = tmp_path / "a.caesar", tmp_path / "b.caesar"
    first.write_text("MODEL a;\nEVENT A(x INT);\n")
    second.write_text("MODEL b;\nEVENT B(y INT);\n")
    docs_a = render(set_files={"model.text": first})
    docs_b = render(set_files={"model.text": second})
    assert one(docs_a, "ConfigMap", "-model")["data"]["model.caesar"] == "MODEL a;\nEVENT A(x INT);"
    # A new model restarts the driver (which redeploys the services) but not the
    # Ray pods: upgrading the model does not restart the cluster.
    checksum = [one(d, "Deployment", "-driver")["spec"]["template"]["metadata"]["annotations"]
                ["checksum/model"] for d in (docs_a, docs_b)]
    assert checksum[0] != checksum[1]
    assert one(docs_a, "RayCluster") == one(docs_b, "RayCluster")


def _notes(helm: Path, tmp_path: Path, values: list[Path]) -> str:
    # `helm template` does not print NOTES.txt and `helm install --dry-run` needs a
    # cluster, so render the same named template through a throwaway manifest.
    chart = tmp_path / "caesar"
    shutil.copytree(CHART, chart)
    assert (CHART / "templates" / "NOTES.txt").read_text().strip() == '{{ include "caesar.notes" . }}'
    (chart / "templates" / "notes-render.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n  notes: |-\n"
        '    {{- include "caesar.notes" . | nindent 4 }}\n')
    docs = render(values, chart=chart)
    return one(docs, "ConfigMap", "notes")["data"]["notes"]


def test_notes_say_where_to_publish_and_consume(helm: Path, tmp_path: Path) -> None:
    notes = _notes(helm, tmp_path, DEFAULT)
    publish, consume = notes.index("PUBLISH"), notes.index("CONSUME")
    assert publish < notes.index("caesar.input.PositionReport") < consume
    assert consume < notes.index("caesar.alerts") and consume < notes.index("caesar.dead-letters")
    assert "caesar-producer: python -m caesar.examples.linear_road.produce" in notes
    assert "4 partitions, replication factor 3" in notes

    notes = _notes(helm, tmp_path / "b", NO_SPARK)
    assert "payments    <- Payment events" in notes and "logins    <- Login events" in notes
    assert "fraud.alerts" in notes
    assert "Spark jobs" not in notes
    assert "create these topics yourself" in notes
    assert "rollout restart deployment/caesar-driver" in notes


BAD_VALUES = {
    "wrong-types.yaml": [
        "kafka.bootstrapServers: Does not match pattern",
        'kafka.securityProtocol must be one of the following: "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"',
        "ray.workers.replicas: Invalid type. Expected: integer, given: string",
        "topics.partitions: Must be greater than or equal to 1",
        "Additional property partiton is not allowed",
    ],
    "bad-spark-job.yaml": [
        "spark.jobs.producer.module: Does not match pattern",
        "spark.jobs.producer.executor.instances: Must be greater than or equal to 1",
    ],
    "spark-job-module-and-command.yaml": [
        "spark.jobs.producer: Must validate one and only one schema (oneOf)",
    ],
    "spark-job-unknown-command.yaml": [
        'spark.jobs.replay.command must be one of the following: "produce", "consume", "replay"',
    ],
    "sasl-without-secret.yaml": [
        "kafka.sasl.existingSecret: String length must be greater than or equal to 1",
    ],
}
# Rules across fields JSON Schema cannot state (number comparisons) are checked by
# the templates with `fail`: install/template stop, lint only reports them.
BAD_VALUES_TEMPLATE_RULES = {
    "min-above-max.yaml": [
        "ray.workers.minReplicas (5) is greater than ray.workers.maxReplicas (2)",
    ],
}


@pytest.mark.parametrize("filename", BAD_VALUES)
def test_bad_values_are_rejected_by_the_schema(helm: Path, filename: str) -> None:
    path = VALUES_DIR / "bad" / filename
    for command in (["template", "caesar"], ["lint", "--strict"]):
        proc = run_helm(*command, str(CHART), "-f", str(path), check=False)
        assert proc.returncode != 0, f"helm {command[0]} accepted {filename}"
        output = proc.stdout + proc.stderr
        assert "values don't meet the specifications of the schema" in output
        for message in BAD_VALUES[filename]:
            assert message in output, f"helm {command[0]} did not say {message!r}:\n{output}"


@pytest.mark.parametrize("filename", BAD_VALUES_TEMPLATE_RULES)
def test_bad_values_are_rejected_by_the_template_rules(helm: Path, filename: str) -> None:
    path = VALUES_DIR / "bad" / filename
    proc = run_helm("template", "caesar", str(CHART), "-f", str(path), check=False)
    assert proc.returncode != 0, f"helm template accepted {filename}"
    lint = run_helm("lint", "--strict", str(CHART), "-f", str(path), check=False)
    for message in BAD_VALUES_TEMPLATE_RULES[filename]:
        assert message in proc.stderr
        assert message in lint.stdout + lint.stderr


@pytest.mark.parametrize(("override", "message"), [
    ("kafka.sasl.existingSecret=creds", "kafka.sasl.existingSecret is set but kafka.securityProtocol is PLAINTEXT"),
    ("kafka.tls.existingSecret=ca", "kafka.tls.existingSecret is set but kafka.securityProtocol is PLAINTEXT"),
    ("model.existingConfigMap=m,model.text=MODEL x;", "set model.text or model.existingConfigMap, not both"),
    ("ray.autoscaling.enabled=true,ray.workers.replicas=9", "ray.workers.replicas (9) must lie between"),
])
def test_inconsistent_values_fail_with_the_value_to_fix(helm: Path, override: str, message: str) -> None:
    proc = run_helm("template", "caesar", str(CHART), "--set", override, check=False)
    assert proc.returncode != 0
    assert message in proc.stderr


def test_the_example_model_parses() -> None:
    from caesar.language.parser import parse

    text = (CHART / "files" / "model.caesar").read_text()
    model = parse(text, "helm/caesar/files/model.caesar")
    assert model is not None


def test_the_values_in_docs_deploy_md_install_cleanly(helm: Path, tmp_path: Path) -> None:
    """The walkthrough's values file and --set commands render valid manifests."""
    import re

    doc = (CHART.parents[1] / "docs" / "deploy.md").read_text()
    block = re.search(r"`my-values.yaml`:\n\n```yaml\n(.*?)```", doc, re.S)
    assert block, "docs/deploy.md lost its my-values.yaml example"
    values = tmp_path / "my-values.yaml"
    values.write_text(block.group(1))
    commands = re.findall(r"```bash\n(helm (?:install|upgrade) .*?)```", doc, re.S)
    assert len(commands) >= 3
    for command in commands:
        sets = dict(m.split("=", 1) for m in re.findall(r"--set (\S+=\S+)", command))
        docs = render([values], sets=sets)
        assert [str(p) for d in docs for p in validate_manifest(d)] == []
        producer = one(docs, "SparkApplication", "-producer")["spec"]["arguments"]
        # The producer writes where the services read: the model's FROM TOPIC name.
        assert producer[producer.index("--topic") + 1] == "lr-position-reports"
        if "ray.workers.maxReplicas" in sets:
            (group,) = one(docs, "RayCluster")["spec"]["workerGroupSpecs"]
            assert group["maxReplicas"] == int(sets["ray.workers.maxReplicas"])


def test_commands_match_the_caesar_cli(rendered: dict) -> None:
    """The commands the chart runs parse with the real `caesar` CLI (options exist)."""
    import click
    import typer

    from caesar.cli import main as cli

    cli._register_all()
    group = typer.main.get_command(cli.app)
    commands = []
    for name, docs in rendered.items():
        for doc in by_kind(docs, "Job") + by_kind(docs, "Deployment"):
            commands.extend((name, container["command"])
                            for container in doc["spec"]["template"]["spec"]["containers"])
    assert len(commands) == 9  # 4 topic jobs + 5 drivers
    for name, command in commands:
        assert command[0] == "caesar"
        sub = group.get_command(click.Context(group), command[1])
        assert sub is not None, f"{name}: no `caesar {command[1]}` command"
        ctx = sub.make_context(command[1], list(command[2:]))
        if command[1] == "topics":
            assert ctx.params["create"] is True
            assert ctx.params["event_type"] or ctx.params["store"]
        else:
            assert str(ctx.params["model"]) == "/model/model.caesar"
            assert ctx.params["ray_address"].startswith("ray://")


def test_spark_job_modules_exist() -> None:
    """The default Spark jobs are modules with a main() (python -m works) or
    `caesar spark` commands."""
    import importlib

    values = yaml.safe_load((CHART / "values.yaml").read_text())
    commands = []
    for job in values["spark"]["jobs"].values():
        if "command" in job:
            commands.append(job["command"])
            continue
        module = importlib.import_module(job["module"])
        assert callable(getattr(module, "main", None)), f"{job['module']} has no main()"
    assert sorted(commands) == ["consume", "produce", "replay"]


def test_generic_spark_jobs_run_caesar_spark_on_the_charts_model(rendered: dict,
                                                                tmp_path: Path) -> None:
    """`command` jobs run `caesar spark <command> /model/model.caesar <args>`, and those
    arguments parse with the real CLI."""
    import click
    import typer

    from caesar.cli import main as cli

    cli._register_all()
    spark = typer.main.get_command(cli.app).get_command(click.Context(typer.main.get_command(
        cli.app)), "spark")
    assert spark is not None
    apps = {a["metadata"]["name"]: a["spec"] for a in
            by_kind(rendered["generic-spark-jobs"], "SparkApplication")}
    assert set(apps) == {"caesar-produce", "caesar-consume", "caesar-replay"}
    parsed = {}
    for name, spec in apps.items():
        module, group, command, *args = spec["arguments"]
        assert (module, group) == ("caesar.cli.main", "spark")
        assert spec["mainApplicationFile"] == "local:///opt/caesar/bin/run_module.py"
        assert {m["mountPath"] for m in spec["driver"]["volumeMounts"]} >= {"/model"}
        sub = spark.get_command(click.Context(spark), command)
        assert sub is not None, f"{name}: no `caesar spark {command}`"
        parsed[command] = sub.make_context(command, list(args)).params
        assert str(parsed[command]["model"]) == "/model/model.caesar"
    assert parsed["produce"]["source"] == "s3a://bucket/hh/"
    assert parsed["produce"]["maps"] == ["ts=event_time"]
    assert (parsed["consume"]["to"], parsed["consume"]["writer"]) == ("s3a://bucket/out", "spark")
    assert parsed["replay"]["source"] == "s3a://my-bucket/history/"
    # The chart's model is what the jobs run: it compiles, and feeds Sanitize.
    from caesar.jobs.job_model import JobModel

    model = one(rendered["generic-spark-jobs"], "ConfigMap", "-model")["data"]["model.caesar"]
    path = tmp_path / "model.caesar"
    path.write_text(model)
    assert JobModel.load(path).input_topics() == ["hh-sanitize"]


def test_chart_packages_with_its_files(helm: Path, tmp_path: Path) -> None:
    import tarfile

    run_helm("package", str(CHART), "--destination", str(tmp_path))
    (archive,) = tmp_path.glob("caesar-*.tgz")
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    assert {"caesar/Chart.yaml", "caesar/values.yaml", "caesar/values.schema.json",
            "caesar/files/model.caesar", "caesar/templates/NOTES.txt"} <= names
    assert not any("crd-schemas" in n for n in names)  # validation copies, not installable CRDs
