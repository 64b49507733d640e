"""The Cases screen's tree (tui/app/screens/cases.py): the cases by family with their
configs, the suites with their chips, each leaf's mark."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from tui.app.safe import literal
from tui.app.widgets.casedetail import Pick, family_order
from tui.catalog import catalog
from tui.catalog.suites import Suite
from tui.core.errors import UserInputError

GUIDE = 3  # the tree's indent per level: families, cases, configs
Chip = tuple[str, str]  # (suite, vendor/CHIP)


def pick_label(pick: Pick | Chip, marks: set) -> Text:
    mark = "[x]" if pick in marks else "[ ]"
    return literal(f"{mark} {pick[1]}", style="bold" if pick in marks else "")


def add_cases(tree: Tree, cases_dir: Path, marked: set[Pick]) -> dict[str, TreeNode]:
    """The cases by family (case.yaml's kind), every family and case folded: the base
    cases' configs alone are 60 lines (the screen opens the last used one); each case's
    node by name."""
    by_family: dict[str, list[catalog.CaseFile]] = {}
    invalid = []
    for name in catalog.case_names(cases_dir):
        try:
            case = catalog.load_case(name, cases_dir)
        except UserInputError as exc:
            invalid.append((name, str(exc)))
            continue
        by_family.setdefault(case.kind, []).append(case)
    nodes: dict[str, TreeNode] = {}
    for family in sorted(by_family, key=family_order):
        cases = by_family[family]
        label = literal(f"{family} ({len(cases)})", style="bold")
        branch = tree.root.add(label, data=("family", family))
        for case in cases:
            node = branch.add(literal(case.name), data=("case", case.name))
            for ref in catalog.config_refs(case):
                pick = (case.name, ref)
                node.add_leaf(pick_label(pick, marked), data=("config", pick))
            nodes[case.name] = node
    # Every config name whole at 80 columns (iluvatar/BI-V100x1x8-bf16 was cut): two
    # levels of guides, the mark, the name, the scroll bar and the border.
    picks = [leaf.data[1] for node in nodes.values() for leaf in node.children]
    longest = max((len(p[1]) for p in picks), default=0)
    tree.styles.min_width = 2 * GUIDE + len("[ ] ") + longest + 3
    for name, error in invalid:
        tree.root.add_leaf(literal(f"{name}  (invalid)", style="red"), data=("error", error))
    return nodes


def add_suites(
    node: TreeNode, loaded: list[tuple[str, Suite | str]], chips: set[Chip], where: Path
) -> dict[str, Suite]:
    """Under ``node``, each suite read (a suite, or why it cannot be read) with its chips;
    the suites that loaded, by name."""
    suites = {}
    node.remove_children()
    for name, suite in loaded:
        if isinstance(suite, str):
            node.add_leaf(literal(f"{name}  (invalid)", style="red"), data=("error", suite))
            continue
        suites[name] = suite
        branch = node.add(literal(name), data=("suite", name), expand=True)
        for chip in suite.chips:
            branch.add_leaf(pick_label((name, chip), chips), data=("chip", (name, chip)))
    if not loaded:
        node.add_leaf(literal(f"none in {where}", style="dim"))
    return suites
