"""The HTML the gateway serves participants: sign-in, join, the study's start page and the labeling page, which
renders Label Studio's own labeling front end (the same components, controls and validation as in Label Studio)
with only the gateway's data and answers going through the gateway's routes."""

from __future__ import annotations

import json
import re
from html import escape

STYLE = """
body { font-family: system-ui, sans-serif; margin: 0; color: #1f1f1f; background: #fafafa; }
header { display: flex; gap: 1em; align-items: center; padding: .6em 1.2em; background: #fff;
         border-bottom: 1px solid #ddd; }
header .title { font-weight: 600; flex: 1; }
main { max-width: 1300px; margin: 0 auto; padding: 1em 1.2em; }
main.labeling { max-width: none; }
.box { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 1em 1.4em; margin: 1em 0; }
button, .button { font: inherit; padding: .45em 1em; border-radius: 4px; border: 1px solid #888; background: #fff;
                  cursor: pointer; text-decoration: none; color: inherit; }
button.primary, .button.primary { background: #1f6feb; border-color: #1f6feb; color: #fff; }
input[type=text], input[type=password] { font: inherit; padding: .4em; width: 22em; }
.field-note { position: absolute; z-index: 1000; max-width: 28em; padding: .3em .6em; font-size: .9em; background: #fff8e1; border: 1px solid #f0d070; border-radius: 4px; }
.message { padding: .8em 1em; background: #fff8e1; border: 1px solid #f0d070; border-radius: 4px; }
.error { color: #b00020; }
details.instructions > summary { cursor: pointer; font-weight: 600; }
/* the gateway's own boxes (instructions, a practice item's explanation) as a browser shows them, whatever the
   utility styles of Label Studio's editor reset (lists, headings, paragraph margins) */
.box :is(h1, h2, h3, h4, h5, h6, p, ul, ol, li, blockquote, dl, dd, figure, pre, hr, table, img) {
  margin: revert; padding: revert; font-size: revert; font-weight: revert; list-style: revert; display: revert; }
/* Label Studio's bottom bar (Submit) is absolutely placed at the bottom of a full-height app; in this page, which
   scrolls as a whole, that is one screen down from the top, over the answer controls. Sticky instead: it stays in
   sight while the task scrolls and ends below the last control, covering none. */
#label-studio .lsf-bottombar { position: sticky; bottom: 0; z-index: 10; }
"""


PROLIFIC_COMPLETE = "https://app.prolific.com/submissions/complete?cc="  # Prolific's return link with a code

def script_json(value) -> str:
    """JSON that is safe inside a <script> element."""
    return (json.dumps(value, ensure_ascii=False).replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("&", "\\u0026").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def page(title: str, body: str, nonce: str, head: str = "") -> str:
    """An HTML page with the gateway's style (the request's nonce) around `body`."""
    return (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{escape(title)}</title>"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">{head}"
            f"<style nonce=\"{nonce}\">{STYLE}</style></head><body>{body}</body></html>")


API_SCRIPT = """
async function api(path, body, method) {
  let answer;
  try {
    answer = await fetch(path, {method: method || (body === undefined ? 'GET' : 'POST'), credentials: 'same-origin',
      headers: {'Content-Type': 'application/json', 'X-Evalstudio': '1'},
      body: body === undefined ? undefined : JSON.stringify(body)});
  } catch (e) {
    return {error: 'The study server is not reachable.', retry: true};
  }
  let data = {};
  try { data = await answer.json(); } catch (e) { data = {error: 'The study server did not answer (' + answer.status + ').'}; }
  if (!answer.ok && !data.error) data.error = 'The study server refused (' + answer.status + ').';
  if (answer.status >= 500) data.retry = true;  // busy or unreachable: worth asking again
  return data;
}
function say(id, text) { const el = document.getElementById(id); el.textContent = text; el.hidden = !text; }
"""


def sign_in(nonce: str, study: str, participant: str = "", message: str = "") -> str:
    """The sign-in page (participant id and code)."""
    script = API_SCRIPT + """
document.getElementById('form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const answer = await api('/api/sign-in', {participant: document.getElementById('participant').value.trim(),
                                            code: document.getElementById('code').value.trim()});
  if (answer.error) say('error', answer.error); else location.href = '/';
});"""
    body = f"""<header><span class="title">{escape(study)}</span></header><main><div class="box">
<h2>Sign in</h2>
<p>Open the personal link you were sent, or enter your participant id and sign-in code.</p>
{f'<p class="message">{escape(message)}</p>' if message else ''}
<form id="form"><p><label>Participant id<br><input type="text" id="participant" value="{escape(participant)}"
 autocomplete="username"></label></p><p><label>Sign-in code<br><input type="password" id="code"
 autocomplete="current-password"></label></p><p><button class="primary" type="submit">Sign in</button></p>
<p id="error" class="error" hidden></p></form></div></main><script nonce="{nonce}">{script}</script>"""
    return page(f"{study}: sign in", body, nonce)


def join(nonce: str, study: str, key: str, participant: str, platform: dict | None = None) -> str:
    # the crowd platform's study and session ids from the study link (kept with the sign-up)
    """The sign-up page of the study link (the participant's id; the platform's ids kept with it)."""
    script = API_SCRIPT + f"""
const KEY = {script_json(key)}, PLATFORM = {script_json(platform or {})};
document.getElementById('form').addEventListener('submit', async (event) => {{
  event.preventDefault();
  const answer = await api('/api/join', {{...PLATFORM, key: KEY,
                                         participant: document.getElementById('participant').value.trim()}});
  if (answer.error) {{ say('error', answer.error); return; }}
  document.getElementById('form').hidden = true;
  document.getElementById('link').textContent = answer.link;
  document.getElementById('done').hidden = false;
}});"""
    body = f"""<header><span class="title">{escape(study)}</span></header><main><div class="box">
<h2>Join the study</h2>
<form id="form"><p><label>Your participant id (Prolific ID or MTurk Worker ID)<br>
<input type="text" id="participant" value="{escape(participant)}"></label></p>
<p><button class="primary" type="submit">Start</button></p><p id="error" class="error" hidden></p></form>
<div id="done" hidden><p>You are signed in. To come back later, keep this personal link (it signs you in; do not
share it):</p><p><code id="link"></code></p><p><a class="button primary" href="/">Continue to the study</a></p></div>
</div></main><script nonce="{nonce}">{script}</script>"""
    return page(f"{study}: join", body, nonce)


def finished(platform: str | None, completion: str | None) -> str:
    """What a participant who finished every part is told: the completion code if the study has one, and where it
    goes; on MTurk, to submit the HIT (its payment follows the submission, code or not)."""
    code = escape(completion) if completion else None
    if platform == "prolific" and code:
        route = (f"<p>Your completion code: <b>{code}</b> "
                 f'(<a href="{PROLIFIC_COMPLETE}{code}">back to Prolific</a>).</p>')
    elif platform == "mturk" and code:
        route = (f"<p>Your completion code: <b>{code}</b></p><p>Please enter it in the HIT on Mechanical Turk "
                 "and submit the HIT.</p>")
    elif platform == "mturk":
        route = "<p>Please go back to the HIT on Mechanical Turk and submit it.</p>"
    elif code:
        route = f"<p>Your completion code: <b>{code}</b></p>"
    else:
        route = ""
    return f"<div class=\"box\"><h3>Thank you!</h3><p>You have finished every part of this study.</p>{route}</div>"


def start(nonce: str, study: str, participant: str, parts: list[dict], completion: str | None,
          platform: str | None = None) -> str:
    """The start page: each part with its state, and the completion code once every part is finished."""
    rows = []
    for part in parts:
        state = part["state"]
        action = (f'<a class="button primary" href="/label/{escape(part["name"])}">Start</a>' if state == "open"
                  else escape(state))
        rows.append(f"<div class=\"box\"><h3>{escape(part['title'])}</h3><p>{action}</p></div>")
    done = all(p["state"] == "finished" for p in parts)
    end = finished(platform, completion) if done else ""
    body = f"""<header><span class="title">{escape(study)}</span><span>{escape(participant)}</span>
<button id="out">Sign out</button></header><main>{end}{''.join(rows)}</main>
<script nonce="{nonce}">{API_SCRIPT}
document.getElementById('out').addEventListener('click', async () => {{ await api('/api/sign-out', {{}}); location.href = '/'; }});
</script>"""
    return page(study, body, nonce)


# Label Studio's front end is one webpack build: runtime.js, vendor.js and main.js (the whole Label Studio app),
# with the labeling editor (`window.LabelStudio`) in lazily loaded chunks. The gateway registers main.js's modules
# without running its entry point (the Label Studio app, which would call Label Studio's API), then loads the
# editor's chunks the way Label Studio's own config preview does and renders the editor alone.
LABELING_SCRIPT = """
const queue = self.webpackChunklabelstudio;
const register = queue.push.bind(queue);
queue.push = (chunk) => register([chunk[0], chunk[1]]);  // modules only: no entry point runs
"""

LABELING_APP = """
queue.push = register;
const PART = SETUP.part;
let editor = null, current = null;
function status(text) { say('status', text); }
// a config that marks spans (<Labels>) gets the editor's side column: its list of the spans marked, where the
// participant selects one to answer its per-region questions or removes it
function interfaces(update) {
  return ['panel', update ? 'update' : 'submit', 'controls', 'infobar', 'topbar', 'annotations:current',
          ...(SETUP.spans ? ['side-column'] : [])];
}
// An answer the study server could not give now (busy, restarting, a dropped connection) is asked for again, a few
// times and further apart, with a message; a submission repeated after a lost answer is saved once (the gateway
// keeps one annotation per participant and task: a repeated submission updates it).
const WAITS = [2, 4, 8, 15, 30, 30];
async function patiently(path, body) {
  for (const wait of WAITS) {
    const answer = await api(path, body);
    if (!answer.retry || answer.wait) return answer;  // a wait is the caller's to repeat
    status(answer.error + ' Trying again in ' + wait + ' s…');
    await new Promise((resolve) => setTimeout(resolve, wait * 1000));
  }
  return api(path, body);
}
// Only the answer is sent: the gateway measures the time on the task itself and sets every answer's origin.
async function send(annotation) {
  const path = SETUP.practice ? '/api/practice/' + current.ref
    : current.update ? '/api/update/' + current.ref : '/api/submit/' + current.ref;
  const answer = await patiently(path, {result: annotation.serializeAnnotation()});
  if (answer.error && !answer.next) { status(answer.error); return; }
  if (answer.practice) { explain(answer); return; }  // a practice item: its explanation, then on
  status(answer.next ? answer.error : '');  // "next": the task had its answers from others; on to the next one
  delete document.getElementById('editor').dataset.task;  // saved: no task is open until the next one renders
  // the editor finishes its own submit after this callback: move on once it has. Its submit first waits for a
  // draft being saved with a 100 ms interval (waitForDraftSubmission) that reads the selected annotation at its
  // first tick, even when nothing was saving; a timer of the same delay set after it (here, later) fires after that
  // tick, so the editor is never destroyed under it (the gateway now answers a submission within milliseconds)
  setTimeout(() => load(SETUP.next), 100);
}
// a practice item answered (the study's front matter): whether it matched, the expected answer and the item's
// explanation, as the researcher wrote them; the participant moves on when they have read it
function explain(answer) {
  const box = document.getElementById('explanation');
  const expected = Object.values(answer.expected).map((v) => Array.isArray(v) ? v.join(', ') : String(v)).join('; ');
  box.replaceChildren();
  for (const [tag, text] of [['h3', answer.correct ? 'Your answer matches the expected answer.'
                                                   : 'Your answer differs from the expected answer.'],
                             ['p', 'Expected: ' + expected], ['p', answer.explanation]]) {
    const el = document.createElement(tag); el.textContent = text; box.appendChild(el);
  }
  const next = document.createElement('button');
  next.className = 'primary'; next.id = 'continue'; next.textContent = 'Continue';
  next.addEventListener('click', () => {
    box.hidden = true;
    if (answer.last) location.href = '/'; else load(SETUP.next);
  });
  box.appendChild(next); box.hidden = false;
}
function render(task) {
  if (editor) { editor.destroy(); editor = null; }
  const root = document.getElementById('editor');
  root.dataset.task = task.number;  // which of this session's tasks is open (the page's tests wait on it)
  root.replaceChildren(document.createElement('div'));
  root.firstChild.id = 'label-studio';
  current = task;
  document.getElementById('previous').disabled = !task.previous;
  document.getElementById('progress').textContent = task.progress || '';
  // a prefilled study (prefill: in projects.yaml) starts the answer from the task's prediction, the one the gateway
  // sent: the regions' ids are kept, so the gateway tells each region's origin apart by id (server side)
  const prefilled = !task.update && task.predictions && task.predictions.length ? task.predictions : null;
  editor = new window.LabelStudio('label-studio', {
    config: task.guide === 'open' ? SETUP.first_config : SETUP.config, interfaces: interfaces(task.update),
    user: {id: 1, pk: 1, firstName: '', lastName: ''},
    task: {id: task.number, data: task.data, annotations: [], predictions: prefilled || []},
    onLabelStudioLoad: (store) => {
      const annotations = store.annotationStore;
      if (task.update) {  // the participant's saved answer, to change (Label Studio's "Update")
        const saved = annotations.addAnnotation({pk: '1', userGenerate: false});
        annotations.selectAnnotation(saved.id);
        saved.deserializeResults(task.result);
        saved.reinitHistory();
        return;
      }
      if (prefilled) return;  // below, once the editor holds the prediction
      const made = annotations.addAnnotation({userGenerate: true});
      annotations.selectAnnotation(made.id);
    },
    // The editor calls onLabelStudioLoad before its store holds the task's predictions (initializeStore runs after
    // it and then selects the prediction, read only: no Submit). Label Studio's own app (its data manager's
    // LSFWrapper: initializeStore, then addAnnotationFromPrediction) starts the answer once the store holds them;
    // so does this page, when the editor says its store is initialised.
    onStorageInitialized: (store) => {
      if (!prefilled) return;
      const annotations = store.annotationStore;
      const made = annotations.addAnnotationFromPrediction(annotations.predictions[0]);
      annotations.selectAnnotation(made.id);
    },
    onSubmitAnnotation: (store, annotation) => send(annotation),
    onUpdateAnnotation: (store, annotation) => send(annotation),
  });
}
async function load(path) {
  const answer = await patiently(path);
  if (answer.wait) {  // tasks left, held by other participants just now: keep asking, every 30 s
    status(answer.error + ' This page checks again every 30 seconds; please keep it open.');
    setTimeout(() => load(path), 30000);
    return;
  }
  if (answer.error) { status(answer.error); return; }
  if (answer.finished) {
    if (editor) { editor.destroy(); editor = null; }
    document.getElementById('editor').replaceChildren();
    status(answer.finished); document.getElementById('previous').disabled = !answer.previous;
    current = {ref: null, previous: answer.previous};
    return;
  }
  status(''); render(answer);
}
document.getElementById('previous').addEventListener('click', () => {
  if (current && current.previous) load('/api/task/' + current.previous);
});
// A decimal comma is read as the decimal it means. Label Studio's Number control (an <input type=number> whose value
// the editor keeps) drops a typed comma whatever the browser's language, so "1,0" would be stored as 10 and "5,5" as
// 55; here a comma typed or pasted into a number field becomes a point before the field sees it ("1,0" -> 1.0,
// "0,9" -> 0.9, which the range check then refuses), and a note under the field says so.
document.addEventListener('beforeinput', (event) => {
  const field = event.target;
  if (!(field instanceof HTMLInputElement) || field.type !== 'number' || !field.closest('#editor')) return;
  const text = event.data ?? (event.dataTransfer ? event.dataTransfer.getData('text/plain') : null);
  if (!text || !text.includes(',')) return;
  event.preventDefault();
  document.execCommand('insertText', false, text.replaceAll(',', '.'));
  commaNote(field);
}, true);
// the note sits under the field the comma was typed into (not in the editor's own tree, which React redraws) and
// says what the field now holds once it holds a number
function commaNote(field) {
  let note = document.getElementById('comma-note');
  if (!note) {
    note = document.createElement('div');
    note.id = 'comma-note';
    note.className = 'field-note';
    note.setAttribute('role', 'status');
    document.body.appendChild(note);
  }
  const place = () => {
    const box = field.getBoundingClientRect();
    note.style.left = (window.scrollX + box.left) + 'px';
    note.style.top = (window.scrollY + box.bottom + 4) + 'px';
    const value = field.value;
    note.textContent = 'A decimal comma is read as a decimal point' +
      (value !== '' && !isNaN(Number(value)) ? ': this field holds ' + Number(value) + '.' : '.');
    note.hidden = false;
  };
  place();
  field.addEventListener('input', place);
  field.addEventListener('blur', () => {
    place();
    field.removeEventListener('input', place);
    setTimeout(() => { if (document.activeElement !== field) note.hidden = true; }, 6000);
  }, {once: true});
}
// An unrated slider (Label Studio's Number slider: a range input with no value, which a browser draws at mid-range)
// gives no input event when the participant clicks or taps the very value it rests on, so its midpoint could only be
// chosen by moving away and back. A click that leaves a slider unrated chooses the value under the pointer.
document.addEventListener('pointerup', (event) => {
  const field = event.target;
  if (!(field instanceof HTMLInputElement) || field.type !== 'range' || !field.closest('#editor')) return;
  if (field.getAttribute('value') !== '') return;  // rated already: the browser's own events do the rest
  setTimeout(() => {
    if (field.getAttribute('value') !== '') return;
    const set = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set;
    set.call(field, field.value);
    field.dispatchEvent(new Event('input', {bubbles: true}));
    field.dispatchEvent(new Event('change', {bubbles: true}));
  }, 0);
}, true);
queue.push([['evalstudio-gateway'], {}, (require) => {
  // Label Studio's utility styles (Tailwind), which its app adds to the page when it starts (the gateway does not
  // start it): without them the editor's own buttons and panels lose their layout (the span list's "Manual" and
  // "By Time" labels fell under their icons). Added after main.css, as Label Studio's page has them.
  for (const id of Object.keys(require.m)) {
    if (!String(require.m[id]).includes('! tailwindcss v')) continue;
    const style = document.createElement('style');
    style.id = 'label-studio-utilities';
    style.textContent = String(require(id).A);
    document.querySelector('link[href="/react-app/main.css"]').after(style);
  }
  Promise.all(SETUP.chunks.map((id) => require.e(id))).then(() => { require(SETUP.module); load(SETUP.next); });
}]);
"""


def labeling(nonce: str, study: str, title: str, part: str, config: str, instructions: str, chunks: list[int],
             module: int, front_end: dict, first_config: str | None = None, practice: bool = False) -> str:
    """The labeling page of a part: Label Studio's editor with the part's config and instructions."""
    # first_config: the participant's first task of the part has the config's guide open (setup.panels_open);
    # practice: the study's practice items in the part's view (their answers go to /api/practice/N, evalstudio/gateway/front.py)
    setup = script_json({"part": part, "config": config, "first_config": first_config or config, "chunks": chunks,
                   "module": module, "spans": bool(re.search(r"<Labels[\s>/]", config)), "practice": practice,
                   "next": "/api/practice/next" if practice else f"/api/next/{part}"})
    # Label Studio's editor reads its feature flags when main.js loads: the same as Label Studio's own app gives it
    # (without them it would, for one, show "->" in a Text tag as "-&gt;")
    app_settings = script_json({key: front_end[key] for key in ("feature_flags", "feature_flags_default_value",
                                                           "sentry_environment")})
    # the project's instructions come from the researcher's projects.yaml (trusted HTML); scripts in them do not
    # run (the page's Content-Security-Policy allows only the gateway's own scripts)
    # (instructions that the labeling config shows already are marked for Label Studio only: none, no box)
    box = (f'<details class="instructions box" open><summary>Instructions</summary>{instructions}</details>'
           if instructions.strip() else "")
    body = f"""<header><span class="title">{escape(title)}</span><span id="progress"></span>
<button id="previous" disabled>&larr; Previous</button><a class="button" href="/">Study overview</a></header>
<main class="labeling">{box}
<p id="status" class="message" hidden></p><div id="explanation" class="box message" hidden></div>
<div id="editor"></div></main>
<script nonce="{nonce}">window.APP_SETTINGS = {app_settings};</script>
<script nonce="{nonce}" src="/react-app/runtime.js"></script>
<script nonce="{nonce}">{LABELING_SCRIPT}</script>
<script nonce="{nonce}" src="/react-app/vendor.js"></script>
<script nonce="{nonce}" src="/react-app/main.js"></script>
<script nonce="{nonce}">const SETUP = {setup};{API_SCRIPT}{LABELING_APP}</script>"""
    head = '<link rel="stylesheet" href="/react-app/main.css">'
    # the browser tab names the part once: a study of one part has the part's title (Circa's parts begin with it)
    return page(title if title.startswith(study) else f"{study}: {title}", body, nonce, head)
