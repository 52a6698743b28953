"""The CRD schemas kept in helm/crd-schemas and the validators built on them:
they must resolve, and they must reject broken resources (a validator that
accepts anything would make the chart tests pass vacuously)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from deploy_support import (
    CORE_MARKER,
    CRD_DIR,
    CRDS,
    core_definition_names,
    one,
    render,
    validate_manifest,
)


def _markers(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node[CORE_MARKER]] if CORE_MARKER in node else []
        return found + [m for value in node.values() for m in _markers(value)]
    if isinstance(node, list):
        return [m for item in node for m in _markers(item)]
    return []


@pytest.mark.parametrize("key", CRDS, ids=lambda k: k[1] if isinstance(k, tuple) else k)
def test_crd_schema_files_describe_the_right_kind(key: tuple[str, str]) -> None:
    api_version, kind = key
    group, version = api_version.split("/")
    crd = yaml.safe_load((CRD_DIR / CRDS[key]).read_text())
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["spec"]["group"] == group and crd["spec"]["names"]["kind"] == kind
    assert [v["name"] for v in crd["spec"]["versions"]] == [version]
    # Every core type the trimmed schema points at exists in the Kubernetes schema.
    markers = _markers(crd)
    assert markers, "expected core-type markers where upstream inlines core types"
    known = core_definition_names()
    missing = [m for m in markers if m.split("/")[0] not in known]
    assert missing == []


def test_crd_readme_explains_the_trimming() -> None:
    readme = (CRD_DIR / "README.md").read_text()
    assert CORE_MARKER in readme and "ray-project/kuberay" in readme and "kubeflow/spark-operator" in readme


@pytest.fixture(scope="module")
def resources(helm: Path) -> dict[str, dict[str, Any]]:
    docs = render()
    return {"ray": one(docs, "RayCluster"), "spark": one(docs, "SparkApplication", "-producer"),
            "job": one(docs, "Job", "-topics")}


def _broken(doc: dict[str, Any], change) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    change(doc)
    return doc


def _worker(d):
    return d["spec"]["workerGroupSpecs"][0]


def _head_container(d):
    return d["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]


RAY_BREAKAGES = {
    "no head group": lambda d: d["spec"].pop("headGroupSpec"),
    "replicas as text": lambda d: _worker(d).update(minReplicas="one"),
    "worker group without maxReplicas": lambda d: _worker(d).pop("maxReplicas"),
    "misspelt field": lambda d: _worker(d).update(maxReplica=3),
    "rayStartParams not strings": lambda d: _worker(d).update(rayStartParams={"num-cpus": 2}),
    "bad upscaling mode": lambda d: d["spec"].update(autoscalerOptions={"upscalingMode": "Fast"}),
    "pod template: container without image field type": lambda d: _head_container(d).update(image=7),
    "pod template: unknown container field": lambda d: _head_container(d).update(imagee="x"),
    "pod template: env var without name": lambda d: _head_container(d)["env"].append({"value": "x"}),
}

SPARK_BREAKAGES = {
    "no main file": lambda d: d["spec"].pop("mainApplicationFile"),
    "unknown type": lambda d: d["spec"].update(type="Pyhton"),
    "no executors": lambda d: d["spec"]["executor"].update(instances=0),
    "cores as text": lambda d: d["spec"]["driver"].update(cores="1"),
    "bad restart policy": lambda d: d["spec"]["restartPolicy"].update(type="Sometimes"),
    "misspelt field": lambda d: d["spec"]["driver"].update(serviceAcount="x"),
    "core volume: configMap as a list": lambda d: d["spec"]["volumes"][0].update(configMap=["x"]),
    "core env var: valueFrom as text": lambda d: d["spec"]["driver"]["env"].append(
        {"name": "X", "valueFrom": "secret"}),
}

JOB_BREAKAGES = {
    "misspelt field": lambda d: d["spec"].update(backofLimit=1),
    "restart policy as a number": lambda d: d["spec"]["template"]["spec"].update(restartPolicy=1),
}


@pytest.mark.parametrize(("which", "name", "change"), [
    *(("ray", n, c) for n, c in RAY_BREAKAGES.items()),
    *(("spark", n, c) for n, c in SPARK_BREAKAGES.items()),
    *(("job", n, c) for n, c in JOB_BREAKAGES.items()),
], ids=lambda v: v if isinstance(v, str) else "")
def test_validators_reject_broken_resources(resources: dict, which: str, name: str, change) -> None:
    good = resources[which]
    assert validate_manifest(good) == []
    assert validate_manifest(_broken(good, change)) != [], f"{which}: {name} was accepted"
