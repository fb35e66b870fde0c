# gdb extension for libgmp, the M:N green-thread runtime (not GNU MP).
#
# Commands:
#
#   info gmp-tasks      every live task: id, state, wait reason, the thread
#                       (M) it runs on or last ran on, its entry function
#   gmp-bt ID [N]       the backtrace of task ID (at most N frames); a
#                       parked or queued task's from its saved context, a
#                       running one's from its thread
#   gmp-bt all [N]      the same for every live task
#   gmp-sched           the Ps with their run queues, and the Ms
#
# gdb loads this file by itself from the .debug_gdb_scripts section of
# libgmp.so, or of a program linked with libgmp.a, once its `auto-load
# safe-path` admits that file (add-auto-load-safe-path /where/it/lives, or
# set auto-load safe-path / in ~/.gdbinit). It can also be sourced by hand;
# it is installed as share/gmp-runtime/gdb/gmp-runtime-gdb.py. It reads the
# runtime's structures through their debug information, so libgmp must be
# built with -g (the default RelWithDebInfo build is), and it works on a
# live process and on a core file alike.
#
# How gmp-bt works. A task that is not running was switched out inside a
# call (gmp__ctx_mcall), and its gobuf holds exactly what that call's
# caller needs to resume: the stack pointer and return address, and the
# callee-saved registers (src/ctx/ctx_<arch>.h). gdb cannot build a frame
# from such a record by itself (`frame view` takes only sp and pc, and
# unwinds its caller with the registers of the thread it runs on), so a
# Python unwinder steps in for the innermost frame of the selected thread
# and claims that its caller is the task's frame, with every register the
# gobuf holds. gdb's own unwinder (DWARF CFI) takes it from there, down to
# gmp__ctx_trampoline, whose CFI ends every task's stack. We print from
# that second frame on. Nothing in the inferior is written, which is why
# this works on core files too.

import gdb
import gdb.unwinder

# src/internal.h: enum gmp__gstatus (the names are read from the
# program's own table when its debug information has it), GMP__G_SCAN and
# GMP__G_TRACK, enum gmp__pstatus.
_G_STATUS = ["idle", "runnable", "running", "syscall", "waiting", "dead"]
_G_RUNNABLE, _G_RUNNING, _G_SYSCALL, _G_WAITING, _G_DEAD = 1, 2, 3, 4, 5
_G_IDLE = 0
_G_SCAN = 0x1000
_G_TRACK = 0x2000  # a sampled ready, measured as the task starts
_P_STATUS = {0: "idle", 1: "running", 2: "dead"}

# The callee-saved registers each gobuf holds (gdb register name -> gobuf
# field), besides sp and pc.
_SAVED = {
    "x86-64": {n: n for n in ("rbx", "rbp", "r12", "r13", "r14", "r15")},
    "aarch64": dict([("x%d" % i, "x%d" % i) for i in range(19, 30)]),
}
_SP_PC = {"x86-64": ("rsp", "rip"), "aarch64": ("sp", "pc")}


class _Error(Exception):
    pass


def _arch():
    name = gdb.selected_inferior().architecture().name()
    if "x86-64" in name:
        return "x86-64"
    if "aarch64" in name:
        return "aarch64"
    raise _Error("gmp: unsupported architecture %s (x86-64 and aarch64 only)" % name)


def _global(name):
    try:
        return gdb.parse_and_eval(name)
    except gdb.error:
        raise _Error(
            "gmp: cannot read %s: is libgmp loaded, with its debug "
            "information (-g)?" % name
        )


def _string_table(name, fallback):
    """A static `const char *const name[]` of the runtime, as a list."""
    try:
        sym = None
        if hasattr(gdb, "lookup_static_symbol"):
            sym = gdb.lookup_static_symbol(name)
        if sym is None:
            sym = gdb.lookup_symbol(name)[0]
        if sym is None:
            return fallback
        val = sym.value()
        lo, hi = val.type.range()
        out = []
        for i in range(lo, hi + 1):
            p = val[i]
            out.append(p.string() if int(p) != 0 else "")
        return out
    except (gdb.error, RuntimeError, gdb.MemoryError):
        return fallback


# The name tables, read once per command (_refresh, at each invoke).
_names = {"status": _G_STATUS, "reason": []}
_ulong = None


def _refresh():
    global _ulong
    _ulong = gdb.lookup_type("unsigned long")
    _names["status"] = _string_table("gstatus_names", _G_STATUS)
    _names["reason"] = _string_table("waitreason_names", [])


def _status_name(st):
    names = _names["status"]
    return names[st] if 0 <= st < len(names) else "?(%d)" % st


def _reason_name(r):
    names = _names["reason"]
    if 0 <= r < len(names):
        return names[r]
    return "reason %d" % r if r else ""


def _func_name(addr):
    if addr == 0:
        return "?"
    try:
        block = gdb.block_for_pc(addr)
        while block is not None and block.function is None:
            block = block.superblock
        if block is not None:
            return block.function.print_name
    except RuntimeError:
        pass
    try:
        s = gdb.execute("info symbol 0x%x" % addr, to_string=True)
        if not s.startswith("No symbol"):
            return s.split(" in section")[0].split(" + ")[0].strip()
    except gdb.error:
        pass
    return "0x%x" % addr


def _ptr(v):
    return int(v.cast(_ulong))


def _all_g():
    g = _global("gmp__allg")
    while _ptr(g) != 0:
        yield g
        g = g["allglink"]


def _g_status(g):
    return int(g["status"]) & ~(_G_SCAN | _G_TRACK)


# src/preempt.h: g->detach when sysmon has taken the task's P while the
# task runs its own code on its own thread.
_DETACHED = 3


def _detached(g):
    """Whether g runs without a P, detached by sysmon (design.md §13)."""
    try:
        return _g_status(g) == _G_RUNNING and int(g["detach"]) == _DETACHED
    except gdb.error:  # a libgmp from before preemption
        return False


def _state(g):
    return "detached" if _detached(g) else _status_name(_g_status(g))


def _m_id(m):
    return int(m["id"]) if _ptr(m) != 0 else None


def _live(g):
    return _g_status(g) not in (_G_DEAD, _G_IDLE)


def _find_g(gid):
    for g in _all_g():
        if int(g["id"]) == gid and _live(g):
            return g
    raise _Error("gmp: no live task with id %d" % gid)


# ---- info gmp-tasks ----------------------------------------------------------


class _InfoTasks(gdb.Command):
    """List every live libgmp task: id, state, wait reason, the M (thread) it
runs on or last ran on (with "last"), and its entry function."""

    def __init__(self):
        super().__init__("info gmp-tasks", gdb.COMMAND_STATUS)

    def invoke(self, arg, from_tty):
        try:
            _refresh()
            rows = []
            seen = blank = 0
            for g in _all_g():
                st = _g_status(g)
                seen += 1
                if st == _G_IDLE and int(g["id"]) == 0:
                    blank += 1
                if st in (_G_DEAD, _G_IDLE):
                    continue
                reason = _reason_name(int(g["waitreason"])) if st == _G_WAITING else ""
                if st in (_G_RUNNING, _G_SYSCALL) and _ptr(g["m"]) != 0:
                    m = "M%d" % _m_id(g["m"])
                elif _ptr(g["lastm"]) != 0:
                    m = "last M%d" % _m_id(g["lastm"])
                else:
                    m = "-"
                entry = _func_name(_ptr(g["fn"]))
                rows.append((int(g["id"]), _state(g), reason or "-", m, entry))
            rows.sort()
            gdb.write("%6s  %-9s %-18s %-9s %s\n" % ("Id", "State", "Wait reason", "M", "Entry"))
            for r in rows:
                gdb.write("%6d  %-9s %-18s %-9s %s\n" % r)
            gdb.write("%d tasks\n" % len(rows))
            if seen and blank == seen:
                gdb.write("warning: every task structure reads as zeros. A core file "
                          "written by gdb's gcore lacks memory next to guard pages "
                          "(MADV_GUARD_INSTALL); the kernel's own core dumps have it.\n")
        except _Error as e:
            raise gdb.GdbError(str(e))


# ---- gmp-bt ------------------------------------------------------------------


class _GobufUnwinder(gdb.unwinder.Unwinder):
    """While `regs` is set, makes the innermost frame of the selected thread
    unwind to the saved context of a task."""

    def __init__(self):
        super().__init__("gmp-runtime-gobuf")
        self.regs = None  # [(register name, int)]

    def __call__(self, pending_frame):
        if self.regs is None:
            return None
        if hasattr(pending_frame, "level"):
            if pending_frame.level() != 0:
                return None
        arch = self.arch
        sp_name, pc_name = _SP_PC[arch]
        pc = pending_frame.read_register(pc_name)
        # The frame's id must lie just inside the task's stack: gdb stops
        # a backtrace whose next frame is "inner" (at a lower address)
        # than the one before it, and the task's stack may well sit below
        # the thread's.
        task_sp = dict(self.regs)[sp_name]
        info = pending_frame.create_unwind_info(_FrameId(
            gdb.Value(task_sp - 16).cast(
                pending_frame.read_register(sp_name).type), pc))
        for name, value in self.regs:
            t = pending_frame.read_register(name).type
            info.add_saved_register(name, gdb.Value(value).cast(t))
        if not hasattr(pending_frame, "level"):
            self.regs = None  # older gdb: claim the first frame only
        return info


class _FrameId(object):
    def __init__(self, sp, pc):
        self.sp = sp
        self.pc = pc


_UNWINDER = _GobufUnwinder()
gdb.unwinder.register_unwinder(None, _UNWINDER, replace=True)


def _format_value(v):
    try:
        return v.format_string(summary=True)
    except (TypeError, AttributeError):
        return str(v)


def _print_frame(level, frame):
    name = frame.name() or "??"
    args = []
    try:
        block = frame.block()
        while block is not None and block.function is None:
            block = block.superblock
        if block is not None:
            for sym in block:
                if sym.is_argument:
                    try:
                        args.append("%s=%s" % (sym.print_name, _format_value(frame.read_var(sym))))
                    except (gdb.error, RuntimeError):
                        args.append("%s=<optimized out>" % sym.print_name)
    except RuntimeError:
        pass  # no debug information for this frame
    sal = frame.find_sal()
    if sal.symtab is not None:
        where = " at %s:%d" % (sal.symtab.filename, sal.line)
    else:
        lib = gdb.solib_name(frame.pc())
        where = " from %s" % lib if lib else ""
    inline = frame.type() == gdb.INLINE_FRAME
    pc = "" if inline else "0x%016x in " % frame.pc()
    gdb.write("#%-3d %s%s (%s)%s\n" % (level, pc, name, ", ".join(args), where))


def _print_chain(frame, limit):
    level = 0
    while frame is not None and (limit is None or level < limit):
        _print_frame(level, frame)
        level += 1
        try:
            frame = frame.older()
        except gdb.error as e:
            gdb.write("(%s)\n" % e)
            break
    if frame is not None and limit is not None:
        gdb.write("(More stack frames follow...)\n")


def _thread_for_tid(tid):
    for t in gdb.selected_inferior().threads():
        if t.ptid[1] == tid or t.ptid[2] == tid:
            return t
    return None


def _bt_running(g, limit):
    m = g["m"]
    tid = int(m["tid"])
    t = _thread_for_tid(tid)
    if t is None:
        raise _Error("gmp: task %d runs on M%d (tid %d), which gdb does not list"
                     % (int(g["id"]), _m_id(m), tid))
    gdb.write("task %d is %s on M%d, thread %d (LWP %d)%s:\n"
              % (int(g["id"]), _status_name(_g_status(g)), _m_id(m), t.num, tid,
                 ", detached from its P" if _detached(g) else ""))
    old = gdb.selected_thread()
    try:
        t.switch()
        _print_chain(gdb.newest_frame(), limit)
    finally:
        if old is not None and old.is_valid():
            old.switch()


def _bt_saved(g, limit):
    arch = _arch()
    buf = g["sched"]
    regs = [(_SP_PC[arch][0], _ptr(buf["sp"])), (_SP_PC[arch][1], _ptr(buf["pc"]))]
    for reg, field in _SAVED[arch].items():
        regs.append((reg, int(buf[field])))
    if arch == "aarch64":
        regs.append(("x30", _ptr(buf["pc"])))  # lr == pc on resume
    if gdb.selected_thread() is None:
        raise _Error("gmp: no thread to unwind from (is the program running?)")
    try:
        frame0 = gdb.selected_frame()
    except gdb.error:
        frame0 = None
    _UNWINDER.arch = arch
    _UNWINDER.regs = regs
    gdb.invalidate_cached_frames()
    try:
        first = gdb.newest_frame().older()
        _print_chain(first, limit)
    finally:
        _UNWINDER.regs = None
        gdb.invalidate_cached_frames()
        if frame0 is not None:
            try:
                gdb.newest_frame().select()
            except gdb.error:
                pass


def _bt(g, limit):
    st = _g_status(g)
    gid = int(g["id"])
    if st in (_G_RUNNING, _G_SYSCALL) and _ptr(g["m"]) != 0:
        _bt_running(g, limit)
    elif st == _G_RUNNABLE and _ptr(g["lastm"]) == 0:
        gdb.write("task %d has not started yet: entry %s\n" % (gid, _func_name(_ptr(g["fn"]))))
    else:
        what = _status_name(st)
        if st == _G_WAITING:
            what += ", " + (_reason_name(int(g["waitreason"])) or "?")
        gdb.write("task %d [%s]:\n" % (gid, what))
        _bt_saved(g, limit)


class _Bt(gdb.Command):
    """Print the backtrace of a libgmp task: gmp-bt ID [N] (at most N frames),
or gmp-bt all [N] for every live task. A task that is not running is
unwound from the context it saved when it was switched out; a running one
(or one in a system call) from its thread."""

    def __init__(self):
        super().__init__("gmp-bt", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        argv = gdb.string_to_argv(arg)
        if not argv or len(argv) > 2:
            raise gdb.GdbError("usage: gmp-bt ID|all [N]")
        try:
            _refresh()
            limit = int(argv[1]) if len(argv) > 1 else None
            if argv[0] == "all":
                gs = sorted((g for g in _all_g() if _live(g)), key=lambda g: int(g["id"]))
                for i, g in enumerate(gs):
                    if i:
                        gdb.write("\n")
                    _bt(g, limit)
            else:
                _bt(_find_g(int(argv[0], 0)), limit)
        except ValueError:
            raise gdb.GdbError("usage: gmp-bt ID|all [N]")
        except _Error as e:
            raise gdb.GdbError(str(e))


# ---- gmp-sched ---------------------------------------------------------------


class _Sched(gdb.Command):
    """Print libgmp's scheduler: the global queue, each P with its status, M
and run queue (tasks in its ring, and the runnext slot), and each M with
its thread, P and what it does."""

    def __init__(self):
        super().__init__("gmp-sched", gdb.COMMAND_STATUS)

    def invoke(self, arg, from_tty):
        try:
            _refresh()
            self._sched()
        except _Error as e:
            raise gdb.GdbError(str(e))

    def _sched(self):
        s = _global("gmp__sched")
        procs = int(s["gomaxprocs"])
        allp = s["allp"]
        # Live tasks, as gmp__tasks_live counts them: spawns minus exits.
        live = int(s["nspawned_nop"])
        for i in range(allp.type.range()[1] + 1):
            if _ptr(allp[i]) == 0:
                break
            live += int(allp[i]["nspawned"]) - int(allp[i]["nexited"])
        gdb.write(
            "gomaxprocs=%d idleprocs=%d threads=%d spinning=%d idlethreads=%d "
            "global runqueue=%d tasks=%d\n"
            % (procs, int(s["npidle"]), int(s["nthreads"]), int(s["nmspinning"]),
               int(s["nmidle"]), int(s["runq"]["n"]), live))
        for i in range(allp.type.range()[1] + 1):
            p = allp[i]
            if _ptr(p) == 0:
                break
            st = int(p["status"])
            if i >= procs and st == 2:
                continue
            m = _m_id(p["m"])
            qlen = (int(p["runqtail"]) - int(p["runqhead"])) & 0xFFFFFFFF
            nxt = p["runnext"]
            gdb.write(
                "  P%-3d %-8s m=%-4s runq=%-4d runnext=%-6s schedtick=%d syscalltick=%d\n"
                % (int(p["id"]), _P_STATUS.get(st, "?%d" % st),
                   "M%d" % m if m is not None else "-", qlen,
                   "task %d" % int(nxt["id"]) if _ptr(nxt) != 0 else "-",
                   int(p["schedtick"]), int(p["syscalltick"])))
        ms = []
        m = s["allm"]
        while _ptr(m) != 0:
            ms.append(m)
            m = m["alllink"]
        for m in sorted(ms, key=lambda m: int(m["id"])):
            gdb.write("  M%-3d tid=%-7d p=%-4s %s\n" % (
                int(m["id"]), int(m["tid"]),
                "P%d" % int(m["p"]["id"]) if _ptr(m["p"]) != 0 else "-",
                self._m_state(m)))

    @staticmethod
    def _m_state(m):
        g = m["curg"]
        if _ptr(g) != 0:
            st = _g_status(g)
            return "%s task %d (%s)%s" % (
                "in a syscall with" if st == _G_SYSCALL else "running",
                int(g["id"]), _func_name(_ptr(g["fn"])),
                ", detached from its P" if _detached(g) else "")
        if bool(m["spinning"]):
            return "spinning (looking for work)"
        if bool(m["idle"]):
            return "idle (parked)"
        lg = m["lockedg"]
        if _ptr(lg) != 0:
            return "locked to task %d, waiting for it" % int(lg["id"])
        if bool(m["exiting"]):
            return "exiting"
        return "scheduling" if _ptr(m["p"]) != 0 else "without a P"


_InfoTasks()
_Bt()
_Sched()
