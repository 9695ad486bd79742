#!/usr/bin/env python3
"""test_chat_pty.py - `wgml chat` on a pseudo-terminal, typed at as a person would:
two turns, the second evaluating only its new tokens (the first prompt comes from the
KV cache); Ctrl-C at the prompt gives a fresh prompt and drops the half-typed line;
Ctrl-C in the middle of a long reply stops that reply, not the program, which then
answers the next message from the cache; line editing (Backspace, and with libedit
Ctrl-A / Ctrl-F to insert mid-line) changes what is sent; Ctrl-D at an empty prompt
exits with status 0. (tests/test_cli.c's test_chat_pipe drives it through a pipe.)

    test_chat_pty.py WGML_CLI MODEL [--libedit]
(ctest runs it with the build's CLI and stories260K; --libedit when the CLI links
libedit.) Only the Python standard library: pty.fork gives the chat a terminal.
Every wait for output has a deadline, so a hang fails the test instead of blocking.
"""
import contextlib
import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import sys
import tempfile
import termios
import time
from collections import namedtuple

CLI, MODEL = sys.argv[1], sys.argv[2]
LIBEDIT = "--libedit" in sys.argv[3:]
WAIT = 30  # seconds any one expected output may take

# one line per reply with --stats (or one that did not end at the end of the turn)
STATS = re.compile(rb"wgml chat: prompt (\d+) tokens, (\d+) reused, (\d+) evaluated \([^;]*; "
                   rb"(\d+) generated \([^)]*\); ([a-z ]+)(?=\r?\n)")
PROMPT = b"\n> "  # the prompt, at the start of a line
Turn = namedtuple("Turn", "tokens reused evaluated generated why reply")  # a stats line, the reply's text


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)
    print("ok:", what, flush=True)


class Chat:
    """`wgml chat` on the slave side of a pty; the test holds the master."""

    def __init__(self, *args):
        self.argv = [CLI, "chat", "-m", MODEL, "--backend", "cpu", "--temp", "0", "--stats", *args]
        env = dict(os.environ, TERM="xterm", EDITRC=os.devnull)  # no ~/.editrc key bindings
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: a session of its own with the pty as its terminal
            try:
                # 200 columns: no line of the test wraps (libedit would redraw it)
                fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 200, 0, 0))
                os.execve(CLI, self.argv, env)
            finally:
                os._exit(127)
        self.out = b""  # all the output so far
        self.pos = 0  # where the next expect() looks from
        self.status = None

    def read(self, deadline):
        """Reads what the chat wrote, waiting until the deadline at most: None when nothing
        came, b"" at the end (the child closed the terminal)."""
        r, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
        if not r:
            return None
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: the slave side is closed
            data = b""
        self.out += data
        return data

    def expect(self, pattern, what, timeout=WAIT):
        """Waits for a regex (bytes) after self.pos; moves self.pos past it, returns the match."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.out, self.pos)
            if m:
                self.pos = m.end()
                return m
            if time.monotonic() >= deadline:
                raise Failure("%s: not seen in %d s" % (what, timeout))
            if self.read(deadline) == b"":  # the end of the output: the chat is gone, or going
                self.wait_exit(5)
                if self.status is not None:
                    raise Failure("%s: the chat exited first (%s)" % (what, self.describe_status()))

    def send(self, keys):
        os.write(self.fd, keys)

    def state(self):
        """The chat's main thread's state from /proc (R running, S sleeping, ...), None without /proc."""
        try:
            with open("/proc/%d/stat" % self.pid) as f:
                return f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return None

    def settle(self, what):
        """Waits until the chat sleeps in its read of the terminal (libedit's raw mode on, with
        libedit), for the keys typed next. Sooner, the terminal would echo keys before libedit
        reads them, and a Ctrl-C would only set cmd_chat's flag, with no read yet to cut short,
        and be lost: a person would have to press it within microseconds of the prompt."""
        deadline = time.monotonic() + WAIT
        while True:
            raw = not termios.tcgetattr(self.fd)[3] & termios.ICANON
            if (raw or not LIBEDIT) and self.state() in ("S", None):
                return
            if time.monotonic() >= deadline:
                raise Failure("%s: the chat does not wait for keys (%s, %s mode)"
                              % (what, self.describe_status(), "raw" if raw else "cooked"))
            self.read(min(deadline, time.monotonic() + 0.005))

    def prompt(self, what):
        self.expect(re.escape(PROMPT), what + ": the prompt")
        self.settle(what)

    def stats(self, what):
        """Waits for a reply's stats line: a Turn, its reply text from the end of the echoed
        line (Enter) to the stats line."""
        start = self.pos
        m = self.expect(STATS, what + ": the stats line")
        echo_end = self.out.index(b"\n", start) + 1
        reply = self.out[echo_end:m.start()].strip().decode("utf-8", "replace")
        return Turn(*(int(x) for x in m.groups()[:4]), m.group(5).decode(), reply)

    def turn(self, keys, what):
        """Types keys (a message ending in Enter) at the prompt: the reply's Turn, the next prompt seen."""
        self.send(keys)
        t = self.stats(what)
        self.prompt(what)
        return t

    def alive(self):
        if self.status is None:
            pid, st = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = st
        return self.status is None

    def describe_status(self):
        if self.status is None:
            return "running"
        if os.WIFSIGNALED(self.status):
            return "killed by %s" % signal.Signals(os.WTERMSIG(self.status)).name
        return "exit status %d" % os.WEXITSTATUS(self.status)

    def wait_exit(self, timeout=WAIT):
        """Waits for the chat to exit, reading its output meanwhile: its exit status, or None
        (still running at the deadline, or killed by a signal)."""
        deadline = time.monotonic() + timeout
        while self.alive() and time.monotonic() < deadline:
            if self.read(min(deadline, time.monotonic() + 0.1)) == b"":
                time.sleep(0.01)
        return os.WEXITSTATUS(self.status) if self.status is not None and os.WIFEXITED(self.status) else None

    def quit(self, what):
        """Ctrl-D at an empty prompt: the chat must exit with status 0."""
        self.send(b"\x04")
        rc = self.wait_exit()
        check(rc == 0, "%s: exit status 0 (%s)" % (what, self.describe_status()))

    def close(self):
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.fd)

    def tail(self):
        """The last of the output, control characters (escape sequences, lone CRs) shown as \\xNN."""
        text = self.out[-1500:].decode("utf-8", "replace").replace("\r\n", "\n")
        return "".join(ch if ch == "\n" or ch >= " " else "\\x%02x" % ord(ch) for ch in text)


@contextlib.contextmanager
def chat_session(*args):
    """A chat started with args; on a failure its terminal's last output is printed; killed at the end."""
    c = Chat(*args)
    try:
        yield c
    except Failure:
        print("--- the chat's terminal (%s):\n%s\n---" % (" ".join(c.argv), c.tail()))
        raise
    finally:
        c.close()


def edited_turn(c, keys, what, first, saved):
    """/reset, then "Hello there" typed with editing keys: the prompt and the reply of the first
    turn (a fresh conversation, the same message), and /save writes the message as "Hello there"."""
    c.send(b"/reset\r")
    c.expect(rb"a new conversation", what + ": /reset")
    c.prompt(what + " /reset")
    t = c.turn(keys, what)
    check((t.tokens, t.reused, t.evaluated) == (first.tokens, 0, first.tokens),
          "%s: prompt %d tokens, %d reused, %d evaluated, as 'Hello there' in turn 1"
          % (what, t.tokens, t.reused, t.evaluated))
    check(t.reply == first.reply, "%s: the reply %r, as in turn 1 (%r)" % (what, t.reply, first.reply))
    c.send(b"/save " + saved.encode() + b"\r")
    c.expect(rb"saved \d+ messages", what + ": /save")
    c.prompt(what + " /save")
    with open(saved) as f:
        msg = json.load(f)[0]
    check(msg == {"role": "user", "content": "Hello there"}, "%s: the message sent: %r" % (what, msg["content"]))


def conversation(tmp):
    """Two turns with the cache, Ctrl-C at the prompt, line editing, Ctrl-D."""
    with chat_session("-n", "8", "-t", "1") as c:
        c.prompt("start")
        first = c.turn(b"Hello there\r", "turn 1")
        check(first.reused == 0 and first.evaluated == first.tokens,
              "turn 1: prompt %d tokens, %d reused, %d evaluated" % (first.tokens, first.reused, first.evaluated))
        check(0 < first.generated <= 8 and first.reply,
              "turn 1: %d tokens generated (-n 8): %r" % (first.generated, first.reply))
        t = c.turn(b"Tell me a story\r", "turn 2")
        check(t.reused >= first.tokens,
              "turn 2: %d tokens reused, at least turn 1's whole prompt of %d" % (t.reused, first.tokens))
        check(t.evaluated == t.tokens - t.reused,
              "turn 2: only the new tokens evaluated: %d = %d - %d" % (t.evaluated, t.tokens, t.reused))
        check(0 < t.generated <= 8 and t.reply, "turn 2: %d tokens generated: %r" % (t.generated, t.reply))

        # Ctrl-C at the prompt, with a half-typed line: a fresh prompt, the program goes on
        c.send(b"abc")
        c.expect(rb"abc", "the half-typed line's echo")
        c.settle("the half-typed line")
        c.send(b"\x03")
        c.expect(re.escape(PROMPT), "Ctrl-C at the prompt: the prompt")
        # ... and a Ctrl-C sent the moment that prompt shows, without waiting for libedit to
        # wait for keys: SIGINT stays blocked until the wait takes it, so it is not lost
        c.send(b"\x03")
        c.prompt("Ctrl-C at the prompt, twice")
        check(c.alive(), "Ctrl-C at the prompt: still running, a fresh prompt")

        # Backspace (libedit's, or the terminal's own line editing without it); the
        # half-typed "abc" must not come back either (the prompt would be longer)
        edited_turn(c, b"Hellx\x7fo there\r", "Backspace", first, os.path.join(tmp, "backspace.json"))
        if LIBEDIT:  # moving the cursor: Ctrl-A to the start of the line, Ctrl-F one forward
            edited_turn(c, b"Hllo there\x01\x06e\r", "Ctrl-A, Ctrl-F, insert", first,
                        os.path.join(tmp, "insert.json"))

        c.quit("Ctrl-D at an empty prompt")


def interrupt():
    """Ctrl-C in the middle of a long reply stops the reply, not the program."""
    # -n 4000 in a context of 4096: the reply runs for a second or more (some 3000
    # tokens/s here, alone) unless it is stopped
    with chat_session("-n", "4000", "-c", "4096", "-t", "1") as c:
        c.prompt("start")
        c.send(b"Once upon a time\r")
        c.expect(rb"Once upon a time\r?\n", "the message's echo")
        c.expect(rb"\w", "the first words of the reply")  # generating: now stop it
        c.send(b"\x03")
        t = c.stats("the interrupted reply")  # (its text is the part after the first words)
        check(t.why == "interrupted" and 0 < t.generated < 4000,
              "Ctrl-C mid-reply: the reply stopped after %d of at most 4000 tokens (%s)" % (t.generated, t.why))
        c.prompt("after Ctrl-C")
        check(c.alive(), "Ctrl-C mid-reply: still running, a fresh prompt")
        # the next message is answered (its reply as long as the first would be: stopped too,
        # once it runs, so that a slow build such as ASan's does not spend minutes on it)
        c.send(b"Hello there\r")
        c.expect(rb"Hello there\r?\n", "the next message's echo")
        c.expect(rb"\w", "the next reply's first words")
        c.send(b"\x03")
        t2 = c.stats("the message after Ctrl-C")
        c.prompt("after the second Ctrl-C")
        check(t2.generated > 0, "after Ctrl-C: the next message is answered (%d tokens, %s)" % (t2.generated, t2.why))
        check(t2.reused >= t.tokens and t2.evaluated == t2.tokens - t2.reused,
              "after Ctrl-C: %d tokens reused (the first prompt was %d), %d of %d evaluated"
              % (t2.reused, t.tokens, t2.evaluated, t2.tokens))
        c.quit("Ctrl-D after an interrupted reply")


def main():
    t0 = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="wgml-chat-pty-") as tmp:
            conversation(tmp)
            interrupt()
    except Failure as f:
        print("FAIL:", f)
        sys.exit(1)
    print("test_chat_pty: all passed (%s, %.1f s)" % ("libedit" if LIBEDIT else "no libedit", time.monotonic() - t0))


if __name__ == "__main__":
    main()
