'use strict';
// The client's own result shape, converted from the contract's messages (the
// same names as the Python client): statuses and severities without their
// enum prefix ('STATUS_VALID' -> 'VALID'), Durations as numbers (timings in
// seconds as `queue_s` ..., the retry hint as `retry_after_ms`, null when the
// result is final), and request options from plain numbers. May import
// nothing.

function seconds(duration) {
  if (!duration) return 0;
  return Number(duration.seconds || 0) + (duration.nanos || 0) / 1e9;
}

function duration(secondsValue) {
  const whole = Math.trunc(secondsValue);
  return { seconds: whole, nanos: Math.round((secondsValue - whole) * 1e9) };
}

const unprefix = (name, prefix) => (typeof name === 'string' && name.startsWith(prefix) ? name.slice(prefix.length) : name);

function resultFromPb(result) {
  const timings = result.timings || {};
  const out = {
    ...result,
    status: unprefix(result.status, 'STATUS_'),
    messages: (result.messages || []).map((m) => ({ ...m, severity: unprefix(m.severity, 'SEVERITY_') })),
    timings: {
      queue_s: seconds(timings.queue),
      header_s: seconds(timings.header),
      body_s: seconds(timings.body),
      total_s: seconds(timings.total),
      boot_s: seconds(timings.boot),
    },
    retry_after_ms: result.retry_after ? seconds(result.retry_after) * 1000 : null,
  };
  delete out.retry_after;
  // Set when the snippet carried a `reference`: reason '' when it passed,
  // else STATEMENT_MISMATCH, MISSING_DECLARATION, KIND_CHANGED, ...
  if (result.reference) {
    const reason = unprefix(result.reference.reason, 'REFERENCE_REASON_');
    out.reference = { ...result.reference, reason: reason === 'UNSPECIFIED' ? '' : reason };
  } else {
    out.reference = null;
  }
  out.judge = result.judge ? unprefix(result.judge.level, 'JUDGE_LEVEL_') : '';
  return out;
}

// VerifyOptions from the client's arguments; timeoutS 0 means the server
// default, profile '' the server's default REPL profile (toolchain), cache
// null the server's result-cache default (false bypasses it).
// checkAxioms: null (the default) leaves `check_axioms` unset, so the server's
// default applies (`[axioms] check`, on); false turns the check off for the call.
// allTactics / rootGoals / declarations: the REPL's command options (the
// result's `tactics`, `root_goals`, `declarations_json`; docs/CLIENTS.md).
function verifyOptions({
  timeoutS = 0, checkAxioms = null, profile = '', cache = null,
  allTactics = false, rootGoals = false, declarations = false,
} = {}) {
  const options = {
    profile, all_tactics: Boolean(allTactics), root_goals: Boolean(rootGoals), declarations: Boolean(declarations),
  };
  if (checkAxioms !== null && checkAxioms !== undefined) options.check_axioms = Boolean(checkAxioms);
  if (timeoutS) options.timeout = duration(timeoutS);
  if (cache !== null && cache !== undefined) options.cache = Boolean(cache);
  return options;
}

// OpenSessionResponse / RunInSessionResponse -> a plain object: `env` is the
// new session env id (null if the code made none), `profile` the session's.
function sessionResultFromPb(response) {
  // `env` is proto3 optional: the loader's synthetic oneof `_env` says whether it is set.
  const set = '_env' in response ? response._env === 'env' : response.env !== undefined && response.env !== null;
  const env = set ? Number(response.env) : null;
  return {
    session: response.session,
    env,
    result: resultFromPb(response.result),
    replayed_commands: Number(response.replayed_commands || 0),
    profile: response.profile || '',
  };
}

// The `str` trap (issue 38): a bare string where a list of snippets goes
// would be verified character by character; refuse it, and name the key meant
// when a snippet object lacks `code` (Kimina's `proof`, LeanInteract's `cmd`).
const CODE_ALIASES = ['proof', 'cmd', 'snippet', 'text', 'lean'];

function checkSnippets(snippets, method) {
  if (typeof snippets === 'string') {
    throw new TypeError(`${method}() takes an array of snippets, not one string: `
      + `write ${method}([{ id: '0', code }]) to verify a single snippet`);
  }
  if (!Array.isArray(snippets)) {
    throw new TypeError(`${method}() takes an array of {id, code} snippets, not ${snippets === null ? 'null' : typeof snippets}`);
  }
  snippets.forEach((snippet, n) => {
    if (snippet === null || typeof snippet !== 'object') {
      throw new TypeError(`snippet ${n} is a ${typeof snippet}; give an object {id, code}`);
    }
    if (typeof snippet.code !== 'string') {
      const alias = CODE_ALIASES.find((key) => key in snippet);
      const hint = alias ? ` (its "${alias}" is the code? name it "code")` : '';
      throw new TypeError(`snippet ${n} has no string "code"${hint}; a snippet is {id, code}, `
        + `got the keys ${JSON.stringify(Object.keys(snippet).sort())}`);
    }
  });
}

// Option names other clients use for ours (`timeout` for `timeoutS`).
const MEANT = { timeout: 'timeoutS', timeout_s: 'timeoutS', deadline: 'deadlineS', deadline_s: 'deadlineS',
  check_axioms: 'checkAxioms', on_result: 'onResult', all_tactics: 'allTactics', root_goals: 'rootGoals' };

function checkOptions(options, allowed, method) {
  for (const key of Object.keys(options || {})) {
    if (allowed.includes(key)) continue;
    const meant = MEANT[key] || allowed.find((name) => name.toLowerCase() === key.toLowerCase());
    const hint = meant && allowed.includes(meant) ? `; did you mean ${meant}?` : '';
    throw new TypeError(`${method}() got an unknown option ${JSON.stringify(key)}${hint}`);
  }
}

// The REPL command options a verify call may name (verifyOptions' own names).
const COMMAND_OPTIONS = ['allTactics', 'rootGoals', 'declarations'];
const commandOptions = (opts) => Object.fromEntries(COMMAND_OPTIONS.filter((k) => k in opts).map((k) => [k, opts[k]]));

module.exports = {
  COMMAND_OPTIONS, commandOptions, resultFromPb, sessionResultFromPb, verifyOptions, duration, seconds, checkSnippets, checkOptions,
};
