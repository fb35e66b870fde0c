#!/usr/bin/env python3
"""The doc check's own test: .ci/check-docs passes a small tree whose docs
agree with its code, and fails, naming the stale reference, each time one
is planted in it.

    python3 tests/docs/test_check_docs.py [-v]
"""
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                      ".ci", "check-docs")

GOOD = {
    "docs/design.md": """\
        # The design

        ## §1 Tasks

        gmp_go starts a task (§2.1 says how).

        ## §2 The scheduler

        ### §2.1 The loop

        gmp__schedule runs it; the gmp_chan_* calls park.
        """,
    "docs/hacking.md": """\
        # Hacking

        | file | what it holds |
        |---|---|
        | `sched.c`, `sched.h` | the scheduler |
        | `ctx/ctx.h` | the switch |

        Tests live in `tests/test_sched.c`; Go's `proc.go` is the reference.
        """,
    "docs/guide.md": "Call gmp_go (design.md §1, §2 and §2.1).\n",
    "README.md": "See gmp_go, and the GMP_DEBUG variable.\n",
    "src/sched.c": """\
        /* The scheduler (design.md §2). gmp__schedule picks the next
         * task, as design.md
         * §2.1 says. */
        #include "sched.h"
        int gmp__schedule(void) { return gmp_chan_send(); }
        static const char *v = "GMP_DEBUG";
        """,
    "src/sched.h": "int gmp__schedule(void); /* §9 of RFC 1 */\n",
    "src/ctx/ctx.h": "int gmp_go(void);\nint gmp_chan_send(void);\n",
    "tests/test_sched.c": "/* See design.md §1. */ int t = 0;\n",
}
GOOD = {path: textwrap.dedent(text) for path, text in GOOD.items()}


def write_tree(root, files):
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)


class CheckDocs(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="check-docs-")

    def tearDown(self):
        shutil.rmtree(self.root)

    def run_check(self, changes=None, removed=()):
        files = dict(GOOD)
        files.update(changes or {})
        for path in removed:
            del files[path]
        write_tree(self.root, files)
        p = subprocess.run([sys.executable, SCRIPT, self.root],
                           capture_output=True, text=True)
        return p.returncode, p.stdout

    def assert_fails(self, needle, **kw):
        rc, out = self.run_check(**kw)
        self.assertEqual(rc, 1, "the check passed a stale reference:\n" + out)
        self.assertIn(needle, out)

    def test_agreeing_tree_passes(self):
        rc, out = self.run_check()
        self.assertEqual(rc, 0, out)

    def test_stale_name_in_docs_fails(self):
        self.assert_fails("docs/guide.md:1: gmp__with_runtime does not exist",
                          changes={"docs/guide.md": "Call gmp__with_runtime.\n"})

    def test_stale_name_in_comment_fails(self):
        self.assert_fails("src/sched.h:1: gmp__if_running does not exist",
                          changes={"src/sched.h":
                                   "/* gmp__if_running */ int gmp__schedule(void);\n"})

    def test_name_only_in_comments_fails(self):
        # A name that occurs in comments only is not code.
        self.assert_fails("gmp__ghost does not exist", changes={
            "src/extra.c": "/* gmp__ghost */\n/* gmp__ghost again */\n",
            "docs/hacking.md": GOOD["docs/hacking.md"].replace(
                "| `ctx/ctx.h` |", "| `ctx/ctx.h`, `extra.c` |")})

    def test_prefix_that_matches_nothing_fails(self):
        self.assert_fails("gmp_sem_* matches no name",
                          changes={"docs/guide.md": "The gmp_sem_* calls.\n"})

    def test_missing_file_named_in_docs_fails(self):
        self.assert_fails("names file gmp_test_util.h",
                          changes={"docs/guide.md": "See gmp_test_util.h.\n"})

    def test_missing_section_fails(self):
        self.assert_fails("src/sched.c:1: cites design.md §34",
                          changes={"src/sched.c": GOOD["src/sched.c"].replace(
                              "(design.md §2)", "(design.md §34)")})

    def test_missing_section_in_a_list_fails(self):
        self.assert_fails("docs/guide.md:1: cites design.md §7",
                          changes={"docs/guide.md":
                                   "Call gmp_go (design.md §1, §2 and §7).\n"})

    def test_missing_section_across_comment_lines_fails(self):
        self.assert_fails("src/sched.c:3: cites design.md §2.5",
                          changes={"src/sched.c": GOOD["src/sched.c"].replace(
                              "§2.1 says", "§2.5 says")})

    def test_missing_section_cited_after_fails(self):
        self.assert_fails("cites design.md §3", changes={
            "tests/test_sched.c": "/* as §3 of docs/design.md says */\n"})

    def test_bare_section_in_docs_fails(self):
        self.assert_fails("docs/design.md:5: cites design.md §2.2",
                          changes={"docs/design.md":
                                   GOOD["docs/design.md"].replace("§2.1 says",
                                                                  "§2.2 says")})

    def test_other_documents_sections_are_not_citations(self):
        # "§9 of RFC 1" in src/sched.h is not a citation of design.md.
        rc, out = self.run_check(changes={
            "src/extra.c": "/* RFC 9112 §2.2 */ int x;\n",
            "docs/hacking.md": GOOD["docs/hacking.md"].replace(
                "| `ctx/ctx.h` |", "| `ctx/ctx.h`, `extra.c` |")})
        self.assertEqual(rc, 0, out)

    def test_reserved_number_may_only_be_reserved(self):
        design = GOOD["docs/design.md"].replace(
            "## §1 Tasks", "- §3 *(reserved: the hooks)*\n\n## §1 Tasks")
        rc, out = self.run_check(changes={"docs/design.md": design})
        self.assertEqual(rc, 0, out)
        self.assert_fails("src/sched.h:1: cites design.md §3, which is only "
                          "reserved", changes={
                              "docs/design.md": design,
                              "src/sched.h": "/* design.md §3 */ int gmp__schedule(void);\n"})

    def test_duplicate_heading_fails(self):
        self.assert_fails("§2 is also the heading", changes={
            "docs/design.md": GOOD["docs/design.md"] + "\n## §2 Again\n"})

    def test_hacking_row_for_missing_file_fails(self):
        self.assert_fails("docs/hacking.md:6: names ctx/gone.h", changes={
            "docs/hacking.md": GOOD["docs/hacking.md"].replace(
                "`ctx/ctx.h`", "`ctx/ctx.h`, `ctx/gone.h`")})

    def test_hacking_path_for_missing_file_fails(self):
        self.assert_fails("names tests/gmp_test_util.h", changes={
            "docs/hacking.md": GOOD["docs/hacking.md"].replace(
                "`tests/test_sched.c`", "`tests/gmp_test_util.h`")})

    def test_src_file_without_row_fails(self):
        self.assert_fails("src/uring.c has no row", changes={
            "src/uring.c": "int gmp__uring;\n"})


if __name__ == "__main__":
    unittest.main()
