"""projects.yaml and the labeling configs: faithful to the protocols, validated by the SDK's LabelInterface."""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

from evalstudio.base.errors import RegistryError, UnknownName
from evalstudio.protocols import registry
from evalstudio.values import controls

from .conftest import PROJECTS, ROOT, with_absolute_files

# The protocols as published (see docs/participants.md): control -> (min, max) or labels.
SPEC = {
    "sotopia": {**{f"{a}_{d}": r for a in ("agent1", "agent2") for d, r in {
        "believability": (0, 10), "relationship": (-5, 5), "knowledge": (0, 10), "secret": (-10, 0),
        "social_rules": (-10, 0), "financial_and_material_benefits": (-5, 5), "goal": (0, 10)}.items()}},
    "cmv_tom": {f"q{i}_{c}": ["Yes", "No"] for i, c in enumerate(
        ["persuasive", "beliefs", "desires", "intentions", "emotions", "knowledge", "perspective_taking"], start=1)},
    "cmv_threads": {"q1_persuasive": ["Yes", "No"]},
    "circa_part1": {"interpretation_choice": ["Yes", "Yes, subject to some conditions", "No",
                                              "In the middle, neither yes nor no", "Other"]},
    "circa_part2": {"explanation_rating": (1, 5)},
    "dialogue": {"appropriateness": (1, 5), "information_content": (1, 5), "human_likeness": (1, 5)},
    "health": {**{k: (1, 10) for k in ["explainability", "controllability", "machine_intelligence", "real_time_learning",
                                       "iterative_interaction", "emotional_interaction", "contractual_trust",
                                       "emotional_trust", "willingness_to_continue"]}},
}


@pytest.mark.parametrize("protocol", PROJECTS)
def test_config_matches_published_protocol(reg, protocol):
    project = reg.entry(protocol)
    li = project.interface  # parsed and validated by label_studio_sdk's LabelInterface
    for name, expected in SPEC[protocol].items():
        control = li.get_control(name)
        if isinstance(expected, tuple):
            assert controls.control_range(control) == tuple(map(float, expected)), name
        else:
            assert list(control.labels) == expected, name
        assert control.attr.get("required") == "true", f"{name} must be required"
    assert project.config_path.name == f"{protocol}.xml" and project.importer == project.study_name
    assert "../shared/seeds/" in project.label_config.split("-->")[0]  # the source document, named at the top


@pytest.mark.parametrize("protocol, controls", [
    ("sotopia", [f"{a}_{d}_rationale" for a in ("agent1", "agent2") for d in ("believability", "goal", "secret")]),
    ("cmv_tom", ["note", "bad_instance"]),
    ("cmv_threads", ["note", "bad_instance"]),
])
def test_text_controls(reg, protocol, controls):
    li = reg.entry(protocol).interface
    for name in controls:
        assert li.get_control(name).tag in {"TextArea", "Choices"}
    if protocol.startswith("cmv"):  # optional fields stay optional
        assert li.get_control("note").attr.get("required") != "true"
        assert li.get_control("bad_instance").attr.get("required") != "true"
    else:
        assert all(li.get_control(n).attr.get("required") == "true" for n in controls)


def test_health_accepts_any_decimal_for_all_nine_ratings(reg):
    """Document 004: "Scores can be any decimal values from 1 to 10 (e.g., 5.5, 7.8, 10)" - all nine ratings."""
    li = reg.entry("health").interface
    assert len(li.controls) == 9
    for control in li.controls:
        assert control.attr["step"] == "any" and controls.control_step(control) is None, control.name


def test_sotopia_rates_with_sliders_without_a_default(reg):
    li = reg.entry("sotopia").interface
    numbers = [c for c in li.controls if c.tag == "Number"]
    assert len(numbers) == 14
    assert all(c.attr.get("slider") == "true" and "defaultValue" not in c.attr and "defaultvalue" not in c.attr
               and c.attr.get("required") == "true" for c in numbers)


@pytest.mark.parametrize("protocol", PROJECTS)
def test_dialogues_render_as_plain_turns(reg, protocol):
    """No Paragraphs (its dialogue layout shows audio-sync timestamps and region icons): turns are plain text."""
    li = reg.entry(protocol).interface
    assert not [o for o in li.objects if o.tag == "Paragraphs"]
    # untrusted text is shown by Text (escaped), never as HyperText
    assert not [o for o in li.objects if o.tag == "HyperText"]


def test_rubric_reaches_annotators(reg):
    for project in (reg.entry(protocol) for protocol in PROJECTS):  # the five protocols from their documents
        assert len(project.instructions) > 200
        assert "<Collapse accordion=\"false\">" in project.label_config  # panels inside the task, opened independently
    sotopia = reg.entry("sotopia").label_config
    assert sotopia.count("This is a good annotation example") == 8 and sotopia.count("This is a bad annotation example") == 12


def test_no_shipped_protocol_prefills_answers(reg):
    """No anchoring: model-assisted labelling is an explicit opt-in, off for every shipped protocol."""
    assert [p.name for p in reg if p.prefill] == []


def test_unknown_protocol_lists_valid_names(reg):
    with pytest.raises(UnknownName) as e:
        reg.entry("sotopya")
    assert "valid names: circa, circa_part1, circa_part2, circa_part2_list1, circa_part2_list2, cmv, cmv_threads, cmv_tom, dialogue, esa, health, mqm, sotopia, squality, squality_pairwise" in str(e.value)


def _copy_registry(tmp_path, edit):
    shutil.copytree(ROOT / "labeling_configs", tmp_path / "labeling_configs")
    raw = yaml.safe_load((ROOT / "projects.yaml").read_text())
    edit(raw["projects"])
    path = tmp_path / "projects.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def test_bad_key_is_named_with_its_line(tmp_path):
    path = _copy_registry(tmp_path, lambda p: p["dialogue"]["criteria"]["appropriateness"].update(scale="ratio"))
    with pytest.raises(RegistryError) as e:
        registry.load(path)
    message = str(e.value)
    assert "projects.dialogue.criteria.appropriateness.scale" in message
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "scale: ratio" in text)
    assert f"{path}:{line}:" in message


def _xml_line(config: Path, name: str) -> int:
    """The line of the XML tag named `name`, found by reading the file's text (the oracle of expat's line)."""
    return next(n for n, line in enumerate(config.read_text().splitlines(), 1) if f'name="{name}"' in line)


@pytest.mark.parametrize("entry, edit, xml, control, message", [
    ("sotopia", lambda p: p["sotopia"]["criteria"]["secret"].update(min=0, max=10), "sotopia.xml", "agent1_secret",
     "{yaml}: projects.sotopia.criteria.secret: range 0..10 but control 'agent1_secret' ({xml}) allows -10..0"),
    ("cmv_tom", lambda p: p["cmv_tom"]["criteria"].pop("emotions"), "cmv_tom.xml", "q5_emotions",
     "{xml}: control 'q5_emotions': not described in projects.yaml: add a criterion whose control it is"),
    ("cmv_tom", lambda p: p["cmv_tom"]["criteria"]["beliefs"].update(labels=["Yes", "Maybe"]), "cmv_tom.xml",
     "q2_beliefs", "{yaml}: projects.cmv_tom.criteria.beliefs.labels: ['Yes', 'Maybe'] but control 'q2_beliefs' "
                   "({xml}) offers ['Yes', 'No']"),
    ("cmv_tom", lambda p: p["cmv_tom"]["criteria"]["beliefs"].update(scale="interval", labels=None, min=1, max=2),
     "cmv_tom.xml", "q2_beliefs",
     "{yaml}: projects.cmv_tom.criteria.beliefs: numeric criterion but control 'q2_beliefs' ({xml}) is a Choices"),
])
def test_a_config_error_names_the_xml_file_and_the_controls_line(tmp_path, monkeypatch, entry, edit, xml, control,
                                                                 message):
    """Issue 65.18: a control of the XML that projects.yaml does not describe was reported at
    `projects.yaml:4: projects.mt_da.mt_da.xml: control 'errors' ...` (the file name read as a key of the entry).
    Every problem of a control now names the XML file (relative to the working folder) and the control's line in
    it; a problem of a criterion stays at the criterion's line of projects.yaml."""
    monkeypatch.chdir(tmp_path)
    path = _copy_registry(tmp_path, edit)
    with pytest.raises(RegistryError) as caught:
        registry.load(path)
    config = Path("labeling_configs") / xml
    lines = path.read_text().splitlines()
    start = lines.index(f"  {entry}:") + 1
    keys = message.split("criteria.")[1].split(":")[0].split(".") if "criteria." in message else []
    yaml_line = start
    for key in keys:  # the criterion's line, then its key's below it
        yaml_line = next(n for n, line in enumerate(lines, 1) if n > yaml_line and line.strip().startswith(f"{key}:"))
    criterion = keys[0] if keys else None
    expected = message.format(yaml=f"{path}:{yaml_line}", xml=f"{config}:{_xml_line(config, control)}")
    assert expected in str(caught.value), str(caught.value)
    assert f"projects.{entry}.{xml}" not in str(caught.value)
    if criterion is None:  # the entry that uses the config is named after it
        assert f"(the config of {path}:{start}: projects.{entry})" in str(caught.value)


@pytest.mark.parametrize("edit, attribute", [
    (lambda xml: xml.replace('name="information_content" toName="response"',
                             'name="information_content" toName="respons"'), 'toName="respons"'),
    (lambda xml: xml.replace('name="information_content" toName="response"',
                             'name="information_content" toName="response" bogus="x'), None),
], ids=["toName-names-no-object", "not-xml"])
def test_label_studio_s_own_check_of_a_config_names_the_line(tmp_path, monkeypatch, edit, attribute):
    """A config Label Studio's schema refuses (a control's toName naming no object) or that is no XML named the file
    without a line (`/abs/labeling_configs/dialogue.xml: invalid labeling config: toName="respons" not found`): now
    `labeling_configs/dialogue.xml:LINE:`, the line of the control the message names (or of the syntax error)."""
    monkeypatch.chdir(tmp_path)
    path = _copy_registry(tmp_path, lambda p: None)
    config = Path("labeling_configs") / "dialogue.xml"
    config.write_text(edit(config.read_text()))
    with pytest.raises(RegistryError) as caught:
        registry.load(path).entry("dialogue").interface
    said = str(caught.value)
    assert said.startswith(f"{config}:{_xml_line(config, 'information_content')}: invalid labeling config: "), said
    assert attribute is None or attribute in said


@pytest.mark.parametrize("xml, tag, objects", [
    ("mqm.xml", '<Labels name="errors" toName="target">', "context, source, target"),
    ("mqm.xml", '<Choices name="category" toName="target"', "context, source, target"),
    ("esa.xml", '<Number name="score" toName="target"', "source, target, missing"),
], ids=["labels", "choices", "number"])
def test_a_control_without_to_name_is_named_at_its_line(tmp_path, monkeypatch, xml, tag, objects):
    """A control without toName was refused by Label Studio's schema without a line or the control, at times
    naming another property (`Validation failed on : 'View' is a required property`): now `config.xml:LINE: NAME:
    <Tag> needs toName="..."` with the object tags it may name."""
    monkeypatch.chdir(tmp_path)
    path = _copy_registry(tmp_path, lambda p: None)
    config = Path("labeling_configs") / xml
    config.write_text(config.read_text().replace(tag, tag.replace(' toName="target"', "")))
    name = re.search(r'name="(\w+)"', tag).group(1)
    with pytest.raises(RegistryError) as caught:
        registry.load(path).entry(xml.removesuffix(".xml")).interface
    assert str(caught.value) == (f'{config}:{_xml_line(config, name)}: {name}: <{tag[1:].split()[0]}> needs '
                                 f'toName="..." naming the object tag it labels (one of: {objects})')


def test_titles_fit_label_studio(reg):
    assert all(3 <= len(p.title) <= 50 for p in reg)


def test_fuzzed_projects_yaml_gives_a_registry_or_a_clear_error(tmp_path_factory):
    """Any YAML document (and any bytes) as projects.yaml: a Registry, or a RegistryError naming the file."""
    import yaml
    from hypothesis import given, settings
    from hypothesis import strategies as st

    leaves = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=15)
    values = st.recursive(leaves, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=10), c, max_size=4),
                          max_leaves=20)
    entry = st.fixed_dictionaries({}, optional={k: values for k in (
        "title", "config", "importer", "instructions", "annotators_per_task", "criteria", "agents", "study", "prefill")})
    documents = st.one_of(values, st.fixed_dictionaries({"projects": st.dictionaries(st.text(max_size=12), entry | values,
                                                                                     max_size=3)}))

    @settings(deadline=None)  # cases: the HYPOTHESIS_PROFILE (conftest.py)
    @given(document=documents, raw=st.binary(max_size=60))
    def check(document, raw):
        folder = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))  # mktemp per case is quadratic
        for path, content in ((folder / "a.yaml", yaml.safe_dump(document).encode()), (folder / "b.yaml", raw)):
            path.write_bytes(content)
            try:
                registry.load(path)
            except RegistryError as e:
                assert str(path) in str(e)

    check()


def test_an_entry_error_points_at_the_criterion_s_line(tmp_path):
    """A criterion that does not fit its control is reported at the criterion's own line of projects.yaml (not the
    entry's first), as file:line: projects.NAME.criteria.CRITERION: message."""
    raw = yaml.safe_load((ROOT / "projects.yaml").read_text())
    with_absolute_files(raw)
    raw["projects"]["dialogue"]["criteria"]["human_likeness"]["max"] = 7
    path = tmp_path / "projects.yaml"
    text = yaml.safe_dump(raw, sort_keys=False)
    path.write_text(text)
    with pytest.raises(RegistryError) as caught:
        registry.load(path)
    lines = text.splitlines()
    entry = lines.index("  dialogue:") + 1
    criterion = next(n for n, line in enumerate(lines, 1) if n > entry and line.strip() == "human_likeness:")
    config = Path(raw["projects"]["dialogue"]["config"])
    assert str(caught.value) == (f"{path}:{criterion}: projects.dialogue.criteria.human_likeness: range 1..7 but "
                                 f"control 'human_likeness' ({config.relative_to(ROOT) if ROOT == Path.cwd() else config}:"
                                 f"{_xml_line(config, 'human_likeness')}) allows 1..5")


@pytest.mark.parametrize("channel", ["label-studio", "gateway"])
def test_every_config_with_choices_hides_the_shortcut_hints(reg, channel):
    """Label Studio writes a choice's shortcut after it ("0[1]"), which reads as part of a digit answer: every config
    with choices gets the rule that hides the hints, in both channels, whether or not it has it itself."""
    from label_studio_sdk.label_interface import LabelInterface

    from evalstudio.protocols.channels import HINTS_HIDDEN, config_for

    configs = [reg.get(name).label_config for name in reg.projects]
    configs += [(ROOT / "evalstudio" / "templates" / t / "config.xml").read_text() for t in
                ("likert", "pairwise", "best-worst", "slider")]
    configs.append('<View><Text name="t" value="$t"/><Choices name="c" toName="t"><Choice value="0"/>'
                   '<Choice value="1"/></Choices></View>')
    with_choices = [c for c in configs if "<Choices" in c]
    assert len(with_choices) >= 3
    for config in with_choices:
        shown = config_for(config, channel)
        assert shown.count(HINTS_HIDDEN) == 1
        LabelInterface(shown).validate()


def test_an_error_span_protocol_is_led_to_metadata_controls(tmp_path):
    """Issue 53: MT Direct Assessment 0-100 plus error-span labels, defined as docs/own-protocol.md says. The span
    control is not a criterion: the error names the key that takes it (metadata_controls), and with it the entry
    loads."""
    (tmp_path / "mt_da.xml").write_text(
        '<View><Text name="source" value="$src"/><Text name="translation" value="$mt"/>'
        '<Labels name="errors" toName="translation"><Label value="minor"/><Label value="major"/></Labels>'
        '<Number name="score" toName="translation" min="0" max="100" required="true"/></View>', encoding="utf-8")
    entry = {"title": "MT direct assessment", "config": str(tmp_path / "mt_da.xml"), "instructions": "<p>Rate.</p>",
             "annotators_per_task": 3,
             "input": {"formats": ["jsonl"], "item_id": "id", "data": {"src": "src", "mt": "mt"}},
             "criteria": {"score": {"scale": "interval", "min": 0, "max": 100}}}
    path = tmp_path / "projects.yaml"
    path.write_text(yaml.safe_dump({"projects": {"mt_da": entry}}), encoding="utf-8")
    with pytest.raises(RegistryError) as e:
        registry.load(path)
    assert f"{tmp_path / 'mt_da.xml'}:1: control 'errors': not described in projects.yaml" in str(e.value)
    assert "metadata_controls" in str(e.value)
    path.write_text(yaml.safe_dump({"projects": {"mt_da": entry | {"metadata_controls": ["errors"]}}}),
                    encoding="utf-8")
    assert registry.load(path).get("mt_da").metadata_controls == ["errors"]


def test_a_copied_projects_yaml_says_where_its_config_paths_are_read_from(tmp_path):
    """Issue 53: with --projects pointing at a copy of projects.yaml, the configs were looked for beside the copy and
    the error named the first entry, whatever the command was for. It now gives the line and says how config paths
    resolve and what to do."""
    shutil.copy(ROOT / "projects.yaml", tmp_path / "projects.yaml")
    with pytest.raises(RegistryError) as e:
        registry.load(tmp_path / "projects.yaml")
    message = str(e.value)
    assert message.startswith(f"{tmp_path / 'projects.yaml'}:") and ": projects." in message
    assert "paths are relative to the folder of the projects.yaml that names them" in message
    assert "copy the labeling_configs/ folder beside a copied projects.yaml" in message


def test_every_key_of_an_entry_is_documented():
    """Issue 53: the reference is generated from the model (evalstudio/protocols/reference.py), and every top-level
    key the model accepts is named in the comment block of the shipped projects.yaml (what docs/reference shows)."""
    import re

    from evalstudio.protocols.reference import key_rows

    header = []
    for line in (ROOT / "projects.yaml").read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        header.append(line)
    text = "\n".join(header)
    top = [r["key"] for r in key_rows() if "." not in r["key"]]
    assert {"title", "config", "metadata_controls", "assignment", "criteria"} <= set(top)
    assert [k for k in top if not re.search(rf"\b{k}\b", text)] == []
    nested = {r["key"] for r in key_rows()}
    assert {"assignment.judge", "assignment.budget", "criteria.NAME.scale", "input.candidates.per_task",
            "crowd.bonus.currency"} <= nested
