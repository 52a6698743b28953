"""Output schemas named in a model resolve from any working directory (Ray
actors do not run in the project root)."""

from services.scheduler.runner import _schema_name_of


def test_model_relative_schema_path_resolves_outside_the_project_root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    name = _schema_name_of("schemas/linear_road/TollNotification.avsc", "fallback")
    assert name == "caesar.linear_road.TollNotification"


def test_schema_dir_relative_path_resolves(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _schema_name_of("linear_road/AccidentAlert.avsc", "fallback") == \
        "caesar.linear_road.AccidentAlert"


def test_missing_schema_falls_back(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _schema_name_of("schemas/nope.avsc", "fallback") == "fallback"
