"""The HTML of a study's front matter (evalstudio/gateway/front.py): the consent form, the background and exit
questions, the end of the study for a participant who declined or was screened out, and the practice round in the
part's own labeling view. The researcher's wording is shown as projects.yaml gives it (the consent text as trusted
HTML, like a project's instructions; questions and answers as text)."""

from __future__ import annotations

from html import escape

from evalstudio.protocols.front_matter import Question

from .pages import API_SCRIPT, PROLIFIC_COMPLETE, labeling, page, script_json



def _header(study: str) -> str:
    return f'<header><span class="title">{escape(study)}</span></header>'


def consent(nonce: str, study: str, text: str, statements: list[str]) -> str:
    """The consent text and its statements, each to tick; "I consent" or "I do not consent"."""
    boxes = "".join(f'<p><label><input type="checkbox" class="statement"> {escape(s)}</label></p>' for s in statements)
    script = API_SCRIPT + """
async function answer(accept) {
  const ticked = [...document.querySelectorAll('.statement')].map((box) => box.checked);
  const answer = await api('/api/front/consent', {accept, statements: ticked});
  if (answer.error) say('error', answer.error); else location.href = '/';
}
document.getElementById('yes').addEventListener('click', () => answer(true));
document.getElementById('no').addEventListener('click', () => answer(false));"""
    body = f"""{_header(study)}<main><div class="box" id="consent"><h2>Consent</h2>{text}</div>
<div class="box">{boxes}<p><button class="primary" id="yes">I consent</button> <button id="no">I do not consent</button>
</p><p id="error" class="error" hidden></p></div></main><script nonce="{nonce}">{script}</script>"""
    return page(f"{study}: consent", body, nonce)


def _field(question: Question, index: int) -> str:
    name = f"q{index}"
    if question.type == "choice":
        field = "".join(f'<label><input type="radio" name="{name}" value="{escape(o)}"> {escape(o)}</label><br>'
                        for o in question.options)
    elif question.type == "number":
        field = f'<input type="text" inputmode="decimal" id="{name}">'
        if question.prefer_not_to_say:
            field += (f'<br><label><input type="checkbox" id="{name}-not"> '
                      f'{escape("Prefer not to say")}</label>')
    else:
        field = f'<textarea id="{name}" rows="4" cols="60" maxlength="{question.max_length}"></textarea>'
    optional = "" if question.required else " <i>(optional)</i>"
    return f'<div class="box"><p><b>{escape(question.text)}</b>{optional}</p>{field}</div>'


def questions(nonce: str, study: str, step: str, asked: tuple[Question, ...]) -> str:
    """The background questions (before the tasks) or the exit survey (after them), as one form."""
    spec = script_json([{"name": q.name, "type": q.type} for q in asked])
    script = API_SCRIPT + f"""
const QUESTIONS = {spec}, STEP = {script_json(step)};
document.getElementById('send').addEventListener('click', async () => {{
  const answers = {{}};
  QUESTIONS.forEach((q, i) => {{
    if (q.type === 'choice') {{
      const picked = document.querySelector('input[name=q' + i + ']:checked');
      answers[q.name] = picked ? picked.value : null;
    }} else {{
      const not = document.getElementById('q' + i + '-not');
      answers[q.name] = not && not.checked ? 'Prefer not to say' : (document.getElementById('q' + i).value || null);
    }}
  }});
  const answer = await api('/api/front/' + STEP, {{answers}});
  if (answer.error) say('error', answer.error); else location.href = '/';
}});"""
    title = "A few questions about you" if step == "background" else "Before you go"
    body = f"""{_header(study)}<main><h2>{title}</h2>{''.join(_field(q, i) for i, q in enumerate(asked))}
<p><button class="primary" id="send">Continue</button></p><p id="error" class="error" hidden></p></main>
<script nonce="{nonce}">{script}</script>"""
    return page(f"{study}: {title}", body, nonce)


def ended(nonce: str, study: str, why: str, platform: str | None, code: str | None) -> str:
    """The end for a participant who declined consent or was screened out by the practice round: no task, no
    completion code; the platform's return route."""
    told = ("You did not give your consent, so you will not see any task of this study." if why == "declined" else
            "Thank you for trying the practice items. Your practice answers did not reach the number of correct "
            "answers this study needs, so you will not see its tasks.")
    if platform == "prolific" and code:
        route = (f'<p>Please go back to Prolific with this code: <b>{escape(code)}</b> '
                 f'(<a href="{PROLIFIC_COMPLETE}{escape(code)}">back to Prolific</a>).</p>')
    elif platform == "prolific":
        route = "<p>Please return your submission on Prolific (its “Return” button).</p>"
    elif platform == "mturk":
        route = "<p>Please return the HIT on Mechanical Turk (its “Return” button). Do not submit it.</p>"
    else:
        route = "<p>You may close this page.</p>"
    body = f"""{_header(study)}<main><div class="box" id="ended"><h2>Thank you</h2><p>{told}</p>{route}</div></main>"""
    return page(study, body, nonce)


def practice_labeling(nonce: str, study: str, part, chunks: list[int], module: int, front_end: dict) -> str:
    """The practice round: the part's own labeling view and instructions, its answers checked against the items'
    expected answers and explained."""
    return labeling(nonce, study, f"Practice: {part.title}", part.entry or part.name, part.config,
                    part.instructions, chunks, module, front_end, part.first_config, practice=True)
