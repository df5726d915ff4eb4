"""The code policy's lists (data only): what a snippet may name.

Allow-lists where real proofs allow it (issue 43 item 2), so a name the
policy does not know is refused, not passed:
- ALLOWED_HASH: `#` commands that only read (the whole `#`-word must be one);
- ALLOWED_ATTRIBUTES: attribute names in `@[…]` and `attribute […]`: the
  805 real proofs (shared/datasets) use `simp` only; the rest are the
  attributes Mathlib's own theorems and definitions carry that only tag a
  declaration for a tactic, the simplifier or the elaborator (none installs
  code: `implemented_by`, `extern`, `init`, `csimp`, `*_elab`, `tactic`,
  `norm_num`, `positivity`, `aesop`, `simproc` … are all outside);
- ALLOWED_OPTIONS: `set_option` names (a prefix ends with `.`).
Blocklists stay only where Lean's grammar is open-ended:
- REFUSED_COMMANDS: keywords that run the snippet's own code or define
  syntax, typed here, and the tactics, terms and commands generated from
  Lean's and Mathlib's sources (leanrpc.policy.generated, written by
  tools/gen_code_tactics.py: its header names the source revisions read);
  a generated token that is an identifier glued to a symbol (Mathlib's
  `eval%`) goes to GLUED_COMMANDS instead, keyed by its identifier part;
- NATIVE_NAMES: names of native evaluation (answered by the axiom rule).
May import: leanrpc.policy.generated (data).
"""

from __future__ import annotations

import re

from .generated import CODE_TACTICS

ALLOWED_HASH = frozenset(
    {
        "#check",
        "#check_failure",
        "#print",
        "#reduce",
        "#synth",
        "#where",
        "#help",
        "#version",
        "#guard_msgs",
        "#instances",
        "#whnf",
        # Read-only commands real files use (a scan of Apache-2.0 Lean files,
        # tests/policy/real_files.tsv): they print what simp / norm_num make
        # of a term, note an adaptation, or report on imports; none evaluates
        # the snippet's code.
        "#simp",
        "#norm_num",
        "#check_simp",
        "#adaptation_note",
        "#find_home",
        "#min_imports",
        "#redundant_imports",
        # `0#_` (core's BitVec literal of inferred width): `#` then a hole; no
        # command is spelled `#_`.
        "#_",
        # Mathlib's port commands (2023): they record which mathlib3 name a
        # declaration aligns with, and `#guard_expr` compares two terms.
        "#align",
        "#align_import",
        "#noalign",
        "#guard_expr",
    }
)

ALLOWED_ATTRIBUTES = frozenset(
    {
        "simp",
        "simps",
        "ext",
        "reducible",
        "irreducible",
        "semireducible",
        "instance",
        "default_instance",
        "refl",
        "symm",
        "trans",
        "congr",
        "mono",
        "gcongr",
        "continuity",
        "measurability",
        "fun_prop",
        "nontriviality",
        "norm_cast",
        "push_cast",
        "field_simps",
        "bound",
        "to_additive",
        "deprecated",
        "nolint",
        "inherit_doc",
        "match_pattern",
        "elab_as_elim",
        "induction_eliminator",
        "cases_eliminator",
        "coe",
        "pp_nodot",
        "mk_iff",
        "inline",
        "specialize",
        "grind",
        # From the scan of real files (tests/policy/real_files.tsv): tags that
        # only expose a body to the module system, generate lemmas, cite a
        # reference, set reducibility, or hint the compiler's inlining.
        "expose",
        "simps!",
        "reassoc",
        "stacks",
        "class",
        "implicit_reducible",
        "instance_reducible",
        "defeq",
        "noinline",
        "always_inline",
        "macro_inline",
        "tactic_alt",
        "higher_order",
        "mfld_simps",
        "parity_simps",
    }
)
# The modifiers before an attribute name: `@[local simp]`, `@[scoped ext]`.
ATTRIBUTE_MODIFIERS = frozenset({"local", "scoped"})

ALLOWED_OPTIONS = frozenset(
    {
        "maxHeartbeats",
        "maxRecDepth",
        "synthInstance.maxHeartbeats",
        "synthInstance.maxSize",
        "synthInstance.checkSynthOrder",
        "maxSynthPendingDepth",
        "checkBinderAnnotations",
        "autoImplicit",
        "relaxedAutoImplicit",
        "linter.",
        "pp.",
        "trace.",
        "profiler",
        "profiler.threshold",
        "diagnostics",
        "diagnostics.threshold",
        "maxErrors",
        "exponentiation.threshold",
        "push_neg.use_distrib",
        "simprocs",
        "tactic.hygienic",
        "tactic.simp.trace",
        "backward.",
        "warningAsError",
        "hygiene",
        "structureDiamondWarning",
        # From the scan of real files (tests/policy/real_files.tsv): checks,
        # messages and syntax switches; none runs or weakens anything.
        "aesop.",
        "guard_msgs.diff",
        "lang.lemmaCmd",
        "quotPrecheck",
        "internal.cmdlineSnapshots",
        "experimental.module",
        # Settings of LeanSearchClient's commands (refused: they query the
        # network); set alone they do nothing.
        "leansearch.",
        "leansearchclient.",
        "statesearch.",
    }
)
REFUSED_OPTION_PREFIXES = ("debug.", "compiler.", "interpreter.", "allowUnsafeReducibility")

_TYPED_COMMANDS = frozenset(
    {
        "run_cmd",
        "run_elab",
        "run_meta",
        "run_tac",
        "elab",
        "elab_rules",
        "macro",
        "macro_rules",
        "syntax",
        "declare_syntax_cat",
        "initialize",
        "builtin_initialize",
        "unsafe",
        "by_elab",
        "dsimproc",
        "simproc",
        "simproc_decl",
        "dsimproc_decl",
        "builtin_simproc",
        "builtin_dsimproc",
        "declare_config_elab",
        "register_option",
        "register_builtin_option",
        "register_simp_attr",
        "register_label_attr",
        "declare_simp_like_tactic",
        # Macros over code-running syntax, which the generated list's first reading
        # missed (tools/gen_code_tactics.py now follows such macros; the full Mathlib
        # tree it reads was not at hand to run it again): Mathlib's conv-mode
        # `macro "run_conv" e:doSeq : conv => `(conv| tactic' => run_tac $e)`
        # (Mathlib/Tactic/Conv.lean) runs the snippet's own TacticM code, IO
        # included; Aesop's `declare_aesop_rule_sets` expands into `initialize`.
        "run_conv",
        "declare_aesop_rule_sets",
        # Aesop's command form of the `@[aesop]` attribute (refused as an attribute):
        # `add_aesop_rules safe tactic evil` makes every later `aesop` evaluate `evil`.
        "add_aesop_rules",
    }
)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_'!?]*")
# `#`-tokens are left to the `#` allow-list, which refuses every one not on it.
_GENERATED = sorted(t for t in CODE_TACTICS if not t.startswith("#"))
REFUSED_COMMANDS = _TYPED_COMMANDS | {t for t in _GENERATED if _IDENT.fullmatch(t)}
GLUED_COMMANDS: dict[str, tuple[str, ...]] = {}
for _token in _GENERATED:
    _head = _IDENT.match(_token)
    if _head is not None and _head.end() < len(_token):
        GLUED_COMMANDS[_head.group()] = GLUED_COMMANDS.get(_head.group(), ()) + (_token,)
# A generated token with no identifier first cannot be read as a command word:
# it would be let through, so the module refuses to load instead.
assert all(_IDENT.match(t) for t in _GENERATED), "a generated token the policy cannot match"

# Commands that add tokens to the table: their string atoms are checked.
NOTATION_COMMANDS = frozenset(
    {"notation", "notation3", "infix", "infixl", "infixr", "prefix", "postfix"}
)

# Tactics whose configuration holds code the tactic runs: Mathlib's `LinarithConfig`
# (`discharger : TacticM Unit`, `preprocessors`, `oracle`) and core's `BacktrackConfig`
# (`proc`, `suspend`, `discharge`: MetaM functions) behind `solve_by_elim`,
# `apply_rules` and `apply_assumption`. Their configuration is evaluated, so a config
# item there, `(config := …)` or `(field := …)`, runs whatever the snippet writes into it.
CODE_CONFIG_TACTICS = frozenset(
    {
        "linarith",
        "linarith!",
        "nlinarith",
        "nlinarith!",
        "solve_by_elim",
        "apply_rules",
        "apply_assumption",
    }
)
# Aesop and Mathlib's wrappers over it (`aesop?`, `aesop_cat`, `aesop_graph`, …: every
# tactic whose name starts so) take `(add …)` clauses, whose rules may name a constant of
# tactic type (`TacticM Unit`, `RuleTac`, …): Aesop's `tactic` builder, tried by its
# default builder too, evaluates it (evalConst), so a rule added in the call runs the
# snippet's own code.
AESOP_PREFIX = "aesop"

NATIVE_NAMES = frozenset(
    {"native_decide", "reduceBool", "reduceNat", "ofReduceBool", "ofReduceNat", "native"}
)
