"""Helpers of the deployment tests: run helm, validate rendered manifests.

Core kinds are validated with kubernetes-validate (strict: unknown fields fail).
RayCluster and SparkApplication are validated against the trimmed CRD schemas in
helm/crd-schemas/, whose `x-caesar-core-type` markers point into the Kubernetes
OpenAPI definitions that kubernetes-validate ships (same Kubernetes version).
"""

from __future__ import annotations

import copy
import json
import subprocess
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml
from referencing import Registry, Resource

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "caesar"
CRD_DIR = ROOT / "helm" / "crd-schemas"
VALUES_DIR = Path(__file__).resolve().parent / "values"
HELM = Path.home() / ".cache" / "caesar" / "bin" / "helm"
# The Kubernetes version manifests are validated against (kubernetes-validate ships
# schemas for 1.25-1.37; helm 3.17 renders for 1.32 by default).
K8S_VERSION = "1.32.0"
DEFS_URI = "/api/_definitions.json"
CORE_MARKER = "x-caesar-core-type"
# kind -> (CRD file, served version)
CRDS = {
    ("ray.io/v1", "RayCluster"): "ray.io_rayclusters.yaml",
    ("sparkoperator.k8s.io/v1beta2", "SparkApplication"): "sparkoperator.k8s.io_sparkapplications.yaml",
}


class HelmError(AssertionError):
    pass


def helm_path() -> Path:
    if not HELM.is_file():
        raise AssertionError(
            f"helm is not installed at {HELM}: run `bash scripts/fetch_helm.sh` "
            "(scripts/setup.sh runs it)")
    return HELM


def run_helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(helm_path()), *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    if check and proc.returncode != 0:
        raise HelmError(f"helm {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def values_args(values_files: list[Path], sets: dict[str, str] | None = None,
                set_files: dict[str, Path] | None = None) -> list[str]:
    args: list[str] = []
    for path in values_files:
        args += ["-f", str(path)]
    for key, value in (sets or {}).items():
        args += ["--set", f"{key}={value}"]
    for key, path in (set_files or {}).items():
        args += ["--set-file", f"{key}={path}"]
    return args


def render(values_files: list[Path] | None = None, *, release: str = "caesar",
           namespace: str = "streams", chart: Path = CHART, **kw: Any) -> list[dict[str, Any]]:
    proc = run_helm("template", release, str(chart), "--namespace", namespace,
                    *values_args(values_files or [], **kw))
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str, name_suffix: str = "") -> dict[str, Any]:
    found = [d for d in by_kind(docs, kind) if d["metadata"]["name"].endswith(name_suffix)]
    assert len(found) == 1, f"expected one {kind} named *{name_suffix}, got {len(found)}"
    return found[0]


# ---- schemas ------------------------------------------------------------------

@cache
def _definitions() -> dict[str, Any]:
    path = (resources.files(kubernetes_validate) / "kubernetes-json-schema"
            / f"v{K8S_VERSION}-local-strict" / "_definitions.json")
    return json.loads(path.read_text())


def core_definition_names() -> set[str]:
    return set(_definitions()["$defs"])


def _resolve_markers(node: Any, strict: bool) -> Any:
    """Replace `x-caesar-core-type: T` by a $ref to T; close objects (strict)."""
    if isinstance(node, list):
        return [_resolve_markers(item, strict) for item in node]
    if not isinstance(node, dict):
        return node
    if CORE_MARKER in node:
        return {"$ref": f"{DEFS_URI}#/$defs/{node[CORE_MARKER]}"}
    out = {key: _resolve_markers(value, strict) for key, value in node.items()}
    # kubectl validates custom resources with strict field validation: a field the
    # schema does not declare is an error, not silently pruned.
    if strict and "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def crd_document(kind_key: tuple[str, str]) -> dict[str, Any]:
    return yaml.safe_load((CRD_DIR / CRDS[kind_key]).read_text())


@cache
def crd_validator(api_version: str, kind: str) -> jsonschema.Validator:
    crd = crd_document((api_version, kind))
    version = api_version.split("/")[1]
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema = copy.deepcopy(served["schema"]["openAPIV3Schema"])
    if "$defs" in crd:
        schema["$defs"] = crd["$defs"]
    schema = _resolve_markers(schema, strict=True)
    registry = Registry().with_resource(DEFS_URI, Resource.from_contents(_definitions()))
    return jsonschema.Draft202012Validator(schema, registry=registry)


@dataclass
class Invalid:
    name: str
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.name}: {self.path}: {self.message}"


def validate_manifest(doc: dict[str, Any]) -> list[Invalid]:
    """All schema violations of one rendered manifest (empty = valid)."""
    name = f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
    key = (doc.get("apiVersion"), doc.get("kind"))
    if key in CRDS:
        validator = crd_validator(*key)
        return [Invalid(name, "/".join(map(str, err.absolute_path)), err.message)
                for err in validator.iter_errors(doc)]
    try:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError as err:
        return [Invalid(name, "/".join(map(str, err.path)), err.message)]
    return []


def pod_specs(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod specs a workload manifest will create (Jobs, Deployments, Ray groups)."""
    kind = doc["kind"]
    if kind in ("Job", "Deployment"):
        return [doc["spec"]["template"]["spec"]]
    if kind == "RayCluster":
        spec = doc["spec"]
        return [spec["headGroupSpec"]["template"]["spec"],
                *(g["template"]["spec"] for g in spec.get("workerGroupSpecs", []))]
    return []


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["name"]: item for item in container.get("env", [])}
