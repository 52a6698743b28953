"""Output schemas named in a model travel inside the plan: services resolve them
from any working directory (Ray actors do not run in the project root) and from
an installed package."""

from importlib.resources import files

from caesar.codecs import SchemaRepository
from caesar.language import compile_model
from caesar.services.common.wire import register_model_schemas

LR_MODEL = files("caesar.examples.linear_road") / "model.caesar"


def test_plan_carries_the_schemas_the_model_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan = compile_model(str(LR_MODEL))
    names = register_model_schemas(SchemaRepository(), plan)
    assert names["TollNotification"] == "caesar.linear_road.TollNotification"
    assert names["AccidentAlert"] == "caesar.linear_road.AccidentAlert"


def test_types_without_schema_use_the_generic_form(tmp_path):
    model = tmp_path / "m.caesar"
    model.write_text("EVENT R(ts INT, vid INT)\nDERIVE A(r.vid) PATTERN R r\n")
    plan = compile_model(str(model))
    assert register_model_schemas(SchemaRepository(), plan) == {}


def test_a_schema_that_is_not_there_is_not_invented(tmp_path):
    model = tmp_path / "m.caesar"
    model.write_text('EVENT R(ts INT, vid INT) SCHEMA "schemas/nope.avsc"\n'
                     "DERIVE A(r.vid) PATTERN R r\n")
    plan = compile_model(str(model))
    assert register_model_schemas(SchemaRepository(), plan) == {}
