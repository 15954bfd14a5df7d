"""Spec 003's PAIR loop: a fresh evaluator scores, gaps are looked up in memory, the
caller revises; bounded; every round in the log; a failing evaluator never loses a round."""

from __future__ import annotations

import pytest

from memorist import Memory, ValidationError
from memorist.llm.testing import ScriptedLLM
from memorist.roles.evaluator import Evaluation, Evaluator, Gap, ScriptedEvaluator

TASK = "Write the CSV importer"
CRITERIA = "Has unit tests\nHandles quoted fields"


@pytest.fixture
def m(backend) -> Memory:
    memory = Memory(backend.target, embedder="hashing")
    memory.minutes.record("task_completed", agent_id="coder", project_id="apollo",
                          memory_note="Writing unit tests first caught the empty-input bug", data={"success_criteria_met": 95})
    memory.minutes.record("task_completed", agent_id="coder", project_id="apollo",
                          memory_note="Splitting on commas broke quoted fields", data={"success_criteria_met": 20})
    memory.add("Quoted fields must keep their commas", user_id="apollo", infer=False)
    yield memory
    memory.close()


class Reviser:
    """A caller's revise callback that remembers what it was given."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[dict]]] = []

    def __call__(self, output: str, improvements: list[dict]) -> str:
        self.calls.append((output, improvements))
        return output + f"\n# revision {len(self.calls)}"


def test_a_session_that_converges(m):
    evaluator = ScriptedEvaluator([50, 96])
    revise = Reviser()
    result = m.minutes.pair(TASK, CRITERIA, "v1", revise, project_id="apollo", agent_id="coder", evaluator=evaluator)
    assert result.converged and result.score == 96 and [r.score for r in result.rounds] == [50, 96]
    assert result.output == "v1\n# revision 1"
    # the evaluator saw the task, the criteria and each output: nothing else
    assert evaluator.calls == [(TASK, CRITERIA, "v1"), (TASK, CRITERIA, "v1\n# revision 1")]
    (output, improvements), = revise.calls
    assert output == "v1" and len(improvements) == 1
    imp = improvements[0]
    assert imp["gap"] == {"description": "gap of round 1", "severity": "medium", "criterion": "Has unit tests"}
    assert 0 < len(imp["memories"]) <= 5
    notes = [x.get("memory_note") or x.get("memory") for x in imp["memories"]]
    assert notes[0] == "Writing unit tests first caught the empty-input bug"
    assert {x["source"] for x in imp["memories"]} == {"minute", "fact"}  # minutes and facts of the project
    assert imp["suggestions"][0] == "Address: gap of round 1"
    assert "Worked before (95%): Writing unit tests first caught the empty-input bug" in imp["suggestions"]
    assert result.rounds[1].improvements == []  # met: nothing to retrieve


def test_a_session_that_never_converges_stops_at_max_rounds(m):
    revise = Reviser()
    result = m.minutes.pair(TASK, CRITERIA, "v1", revise, max_rounds=3, project_id="apollo", evaluator=ScriptedEvaluator([10, 20, 30, 40]))
    assert not result.converged and len(result.rounds) == 3 and result.score == 30
    assert len(revise.calls) == 2  # no revision after the last evaluation
    assert result.output == "v1\n# revision 1\n# revision 2"
    assert result.to_dict()["rounds"][2]["improvements"] == []


def test_every_round_is_in_the_log(m):
    result = m.minutes.pair(TASK, CRITERIA, "v1", Reviser(), max_rounds=3, threshold=90, project_id="apollo", agent_id="coder",
                    evaluator=ScriptedEvaluator([10, 20, 95]))
    rounds = m.store.events(ops=["pair_round"])
    assert [(e.payload["round"], e.payload["score"], e.payload["met"]) for e in rounds] == [(1, 10.0, False), (2, 20.0, False), (3, 95.0, True)]
    assert {e.payload["session"] for e in rounds} == {result.session_id}
    assert rounds[0].scope.user_id == "apollo" and rounds[0].scope.agent_id == "coder"
    assert rounds[0].payload["output"] == "v1" and rounds[0].payload["gaps"][0]["description"] == "gap of round 1"
    assert len(rounds[0].payload["memories"][0]) > 0  # the ids shown for the gap
    assert [r.seq for r in result.rounds] == [e.seq for e in rounds]
    (final,) = m.store.events(ops=["pair_result"])
    assert final.payload == {"session": result.session_id, "converged": True, "rounds": 3, "score": 95.0, "threshold": 90.0, "max_rounds": 3}


def test_the_llm_evaluator_through_the_model_seam(m, backend):
    llm = ScriptedLLM([
        {"success_criteria_met": 50, "identified_gaps": [{"description": "No unit tests", "severity": "high", "criterion": "Has unit tests"}],
         "summary": "Half done."},
        {"success_criteria_met": 100, "identified_gaps": [], "summary": "Done."},
    ])
    with Memory(backend.fresh(), embedder="hashing", llm=llm) as lm:
        result = lm.minutes.pair(TASK, CRITERIA, "v1", Reviser())
    assert result.converged and [r.evaluator for r in result.rounds] == [llm.name, llm.name]
    assert result.rounds[0].gaps == [Gap("No unit tests", "high", "Has unit tests")]
    first = llm.requests[0]
    assert len(first.messages) == 1  # a fresh context: task, criteria and output only
    assert "<output>\nv1\n</output>" in first.messages[0].content and TASK in first.messages[0].content


def test_malformed_model_output_falls_back_to_the_heuristic_and_keeps_the_round(m, backend):
    llm = ScriptedLLM(["this is not JSON", "{still not", {"success_criteria_met": 250}, "[]"])
    with Memory(backend.fresh(), embedder="hashing", llm=llm) as lm:
        result = lm.minutes.pair(TASK, CRITERIA, "nothing yet", Reviser(), max_rounds=2)
        rounds = lm.store.events(ops=["pair_round"])
    assert [r.evaluator for r in result.rounds] == ["heuristic", "heuristic"]
    assert result.rounds[0].score == 0.0 and len(result.rounds[0].gaps) == 2  # the heuristic's gaps
    assert len(rounds) == 2 and rounds[0].payload["evaluator"] == "heuristic"


def test_a_custom_evaluator_that_fails_is_replaced_for_the_round(m):
    class Broken(Evaluator):
        def evaluate(self, task: str, criteria: str, output: str) -> Evaluation:
            raise RuntimeError("evaluator down")

    result = m.minutes.pair(TASK, CRITERIA, "Has unit tests and handles quoted fields", Reviser(), evaluator=Broken())
    assert result.converged and result.rounds[0].evaluator == "heuristic"
    assert result.rounds[0].fallback == "RuntimeError: evaluator down"
    assert m.store.events(ops=["pair_round"])[0].payload["fallback"] == "RuntimeError: evaluator down"
    wrong = m.minutes.pair(TASK, CRITERIA, "x", Reviser(), max_rounds=1, evaluator=ScriptedEvaluator([lambda t, c, o: {"score": 99}]))
    assert wrong.rounds[0].evaluator == "heuristic" and "not an Evaluation" in wrong.rounds[0].fallback


def test_one_round_without_revising(m):
    r = m.minutes.pair_round(TASK, CRITERIA, "def load(): pass", project_id="apollo")
    assert r["met"] is False and r["score"] == 0.0 and r["evaluator"] == "heuristic"
    assert [imp["gap"]["criterion"] for imp in r["improvements"]] == ["Has unit tests", "Handles quoted fields"]
    assert all(0 < len(imp["memories"]) <= 5 for imp in r["improvements"])
    assert m.minutes.pair_round(TASK, CRITERIA, "unit tests; handles quoted fields", threshold=90)["improvements"] == []
    assert len(m.store.events(ops=["pair_round"])) == 2


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"threshold": 101}, "threshold"),
        ({"threshold": True}, "threshold"),
        ({"max_rounds": 0}, "max_rounds"),
        ({"max_rounds": 1000}, "max_rounds"),
        ({"revise": "not callable"}, "revise"),
        ({"evaluator": object()}, "evaluator"),
        ({"task": ""}, "task"),
        ({"memories_per_gap": 0}, "memories_per_gap"),
    ],
)
def test_bad_arguments_name_the_field(m, kwargs, field):
    args = {"task": TASK, "criteria": CRITERIA, "output": "v1", "revise": Reviser(), **kwargs}
    with pytest.raises(ValidationError) as info:
        m.minutes.pair(**args)
    assert info.value.field == field
    assert m.store.events(ops=["pair_round"]) == []


def test_a_revise_that_returns_no_text_is_an_error_after_its_round_is_logged(m):
    with pytest.raises(ValidationError, match="revise"):
        m.minutes.pair(TASK, CRITERIA, "v1", lambda output, improvements: None, evaluator=ScriptedEvaluator([10]))
    assert len(m.store.events(ops=["pair_round"])) == 1


def test_a_blank_gap_from_the_model_is_left_out_and_its_verdict_kept(m):
    """A gap of whitespace passed the reply's schema and was stripped to nothing; the
    round's check of its gaps then threw the model's whole evaluation away."""
    from memorist.roles.llm import LLMEvaluator

    reply = {"success_criteria_met": 90, "summary": "mostly there", "identified_gaps": [
        {"description": "Missing the rollback step", "severity": "high", "criterion": "rollback"},
        {"description": "  ", "severity": "low", "criterion": ""}]}
    r = m.minutes.pair_round("Write the deploy plan", "Mentions the rollback step; names the owner", "deploy plan: owner Ann",
                             project_id="p", evaluator=LLMEvaluator(ScriptedLLM(default=reply)))
    assert r["score"] == 90.0
    assert [g if isinstance(g, str) else g["description"] for g in r["gaps"]] == ["Missing the rollback step"]
