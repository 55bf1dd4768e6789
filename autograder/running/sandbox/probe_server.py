"""The probe server: inside the sandbox, run one student's notebook code and answer the grader's probes.

`serve` reads requests from one pipe and writes replies on the other, in wire.py's format, in the fork that
runner.py (the fork server) has confined with confinement.py. Everything it sends is plain data; pass/fail is
never decided here, so whatever the student's code does to this process (monkeypatching, exiting, forging output)
can at most make its own answers wrong. It imports only the standard library; torch and wire are handed in.

Requests (op):
    exec_cell  {"source", "cell", "timeout"}          run one code cell in the notebook's namespace
    call       {"name", "timeout"} + values {"args", "kwargs"}
    module     {"class", "dtype", "method" (e.g. "forward", or a sub-module's "attn.forward"), "timeout", "backward",
                "return_state"}
               + values {"init_args", "init_kwargs", "state_dict", "args", "kwargs", "grad_outputs",
                         "requires_grad"}: build, load weights, run forward and backward
    variable   {"name"}
    exit       {}
"""

import builtins
import io
import os
import signal
import sys
import time
import traceback

OUTPUT_CAP = 16 * 1024


class Timeout(BaseException):
    """The time budget of one cell or probe ran out (a BaseException: `except Exception` can't swallow it)."""


class NotDefined(Exception):
    pass


class ShapeMismatch(Exception):
    """An output the grader wants a gradient for does not have the shape the gradient has."""


class CappedWriter(io.TextIOBase):
    """Stands in for stdout/stderr: keeps the first OUTPUT_CAP characters, counts the rest."""

    def __init__(self):
        self.parts, self.kept, self.dropped = [], 0, 0

    def write(self, text):
        text = str(text)
        room = OUTPUT_CAP - self.kept
        if room > 0:
            self.parts.append(text[:room])
            self.kept += min(room, len(text))
        self.dropped += max(0, len(text) - max(room, 0))
        return len(text)

    def text(self):
        tail = f"\n[... {self.dropped} more characters not shown]" if self.dropped else ""
        return "".join(self.parts) + tail


def _on_alarm(signum, frame):
    raise Timeout()


def _with_timeout(seconds, fn, *args, **kwargs):
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, max(float(seconds), 0.001))
    try:
        return fn(*args, **kwargs)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def describe(exc):
    """Type, message and the student's part of the traceback, defensively (their __str__ may misbehave)."""
    try:
        message = str(exc)[:2000]
    except BaseException:
        message = "<unprintable exception>"
    try:
        frames = traceback.extract_tb(exc.__traceback__)
        student = [f for f in frames if f.filename.startswith("<cell")]
        lines = traceback.format_list(student[-6:])
        trace = "".join(lines)[:4000]
    except BaseException:
        trace = ""
    return {"type": type(exc).__name__, "message": message, "traceback": trace}


# --- the notebook and the probes ------------------------------------------------------------------


class Runner:
    def __init__(self, torch, wire, limits):
        self.torch, self.wire, self.limits = torch, wire, limits
        self.namespace = {"__name__": "__main__", "__builtins__": builtins}
        # Each probe starts from torch's global generator seeded with 0. The CPU generator itself, taken before any
        # cell runs: torch.manual_seed would also queue a seed for every lazily initialised device (CUDA, XPU, MTIA),
        # formatting the whole call stack each time (a sandbox has none of those devices: the same draws), and a
        # cell could rebind torch.manual_seed.
        self.seed = torch.default_generator.manual_seed

    def lookup(self, name):
        if name not in self.namespace:
            raise NotDefined(name)
        return self.namespace[name]

    def exec_cell(self, header, values):
        source = header["source"]
        code = compile(source, f"<cell {header.get('cell', '?')}>", "exec")
        _with_timeout(header["timeout"], exec, code, self.namespace)
        return None

    def call(self, header, values):
        """Call a function; with "repeat": n, call it n times on the same arguments and return every result."""
        fn = self.lookup(header["name"])
        args = [self.materialise(a) for a in values.get("args", [])]
        kwargs = {k: self.materialise(v) for k, v in values.get("kwargs", {}).items()}
        self.seed(0)
        repeat = int(header.get("repeat", 1))
        if repeat == 1:
            return _with_timeout(header["timeout"], fn, *args, **kwargs)
        return tuple(_with_timeout(header["timeout"] / repeat, fn, *args, **kwargs) for _ in range(repeat))

    def variable(self, header, values):
        return self.lookup(header["name"])

    def materialise(self, value):
        """Arguments that stand for objects built here: the student's module with given weights, or a probe net."""
        if isinstance(value, dict) and "$module" in value:
            spec = value["$module"]
            module, load = self.build_module(spec["class"], spec.get("init_args", []), spec.get("init_kwargs", {}),
                                             spec.get("dtype"), spec.get("state_dict"))
            if load["error"] or load["missing"] or load["unexpected"]:
                raise ValueError(load["error"] or f"{spec['class']}: the weights do not fit its parameters "
                                 f"(its own but not given: {load['missing']}; given but not its own: {load['unexpected']})")
            return module
        if isinstance(value, dict) and "$probe_net" in value:
            return self.probe_net(**value["$probe_net"])
        return value

    def build_module(self, class_name, init_args, init_kwargs, dtype, state_dict):
        cls = self.lookup(class_name)
        module = cls(*init_args, **init_kwargs)
        if not isinstance(module, self.torch.nn.Module):
            raise TypeError(f"{class_name}(...) is not an nn.Module")
        if dtype:
            module = module.to(getattr(self.torch, dtype))
        load = {"missing": [], "unexpected": [], "error": None}
        if state_dict is not None:
            try:
                result = module.load_state_dict(state_dict, strict=False)
                load["missing"], load["unexpected"] = list(result.missing_keys), list(result.unexpected_keys)
            except Exception as exc:  # e.g. a shape mismatch
                load["error"] = describe(exc)["message"][:1000]
        return module, load

    def module(self, header, values):
        torch = self.torch
        timeout = header["timeout"]
        start = time.monotonic()

        def remaining():
            return max(timeout - (time.monotonic() - start), 0.001)

        self.seed(0)
        module, load = _with_timeout(remaining(), self.build_module, header["class"], values.get("init_args", []),
                                     values.get("init_kwargs", {}), header.get("dtype"), values.get("state_dict"))
        result = {"load": load, "param_shapes": {k: list(v.shape) for k, v in module.state_dict().items()}}
        if header.get("return_state"):
            result["state"] = {k: v.detach().clone() for k, v in module.state_dict().items()}
        if load["error"] or not header.get("method"):
            return result
        args = [self.materialise(a) for a in values.get("args", [])]
        kwargs = {k: self.materialise(v) for k, v in values.get("kwargs", {}).items()}
        for index in values.get("requires_grad", []):
            args[index] = args[index].detach().clone().requires_grad_(True)
        module.zero_grad(set_to_none=True)
        outputs = _with_timeout(remaining(), _method(module, header["method"]), *args, **kwargs)
        result["outputs"] = outputs
        grad_outputs = values.get("grad_outputs")
        if grad_outputs is not None:
            produced = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
            pairs = [(o, g) for o, g in zip(produced, grad_outputs) if g is not None]
            for out, grad in pairs:
                if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(grad.shape):
                    raise ShapeMismatch(f"{list(getattr(out, 'shape', []))} vs {list(grad.shape)}")
                if not out.requires_grad:
                    raise TypeError("the output does not carry a gradient (was it detached or computed with no_grad?)")
            _with_timeout(remaining(), torch.autograd.backward, [o for o, _ in pairs], [g for _, g in pairs])
            result["input_grads"] = [args[i].grad for i in values.get("requires_grad", [])]
            result["param_grads"] = {name: p.grad for name, p in module.named_parameters()}
        return result

    def probe_net(self, d_model, num_layers, dtype, state_dict):
        """A small tanh MLP with a `layers` ModuleList: an input for model-generic functions (not reference code)."""
        torch = self.torch

        class ProbeNet(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = torch.nn.ModuleList([torch.nn.Linear(d_model, d_model) for _ in range(num_layers)])

            def forward(self, x):
                for layer in self.layers:
                    x = torch.tanh(layer(x))
                return x

        net = ProbeNet().to(getattr(torch, dtype))
        net.load_state_dict(state_dict)
        return net


def _method(module, path):
    """The method `path` names on the module: "forward", or a sub-module's, "attn.forward" (by attribute names)."""
    *owners, name = str(path).split(".")
    target = module
    for owner in owners:
        target = getattr(target, owner)
    return getattr(target, name)


def _restore(namespace, snapshot):
    for key in [k for k in namespace if k not in snapshot]:
        del namespace[key]
    namespace.update(snapshot)


def serve(torch, wire, fd_in, fd_out, config, landlock_abi):
    """Answer the grader's requests on fd_in/fd_out until it says exit or closes the pipe."""
    builtins_snapshot = dict(vars(builtins))  # restored after every request: patches to builtins don't last
    runner = Runner(torch, wire, config)
    wire.write_frame(fd_out, {"op": "ready", "torch": torch.__version__, "python": sys.version.split()[0],
                              "uid": os.getuid(), "pid": os.getpid(), "landlock_abi": landlock_abi})
    handlers = {"exec_cell": runner.exec_cell, "call": runner.call, "module": runner.module,
                "variable": runner.variable}
    while True:
        try:
            header, values = wire.read_frame_blocking(fd_in, config["max_request_bytes"], config["max_elements"])
        except EOFError:
            return
        op = header.get("op")
        if op == "exit":
            return
        output = CappedWriter()
        sys.stdout = sys.stderr = output
        started = time.monotonic()
        reply, reply_values = {"op": op, "id": header.get("id")}, None
        try:
            result = handlers[op](header, values or {})
            reply["ok"] = True
            reply_values = {"result": result}
        except (NotDefined, ShapeMismatch) as exc:
            reply.update(ok=False, error={"type": type(exc).__name__, "message": str(exc), "traceback": ""})
        except Timeout:
            reply.update(ok=False, error={"type": "Timeout", "message": "", "traceback": ""})
        except BaseException as exc:  # the student's SystemExit, KeyboardInterrupt, anything
            reply.update(ok=False, error=describe(exc))
        finally:
            _restore(vars(builtins), builtins_snapshot)
            sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        reply["seconds"] = time.monotonic() - started
        reply["output"] = output.text()
        try:
            wire.write_frame(fd_out, reply, reply_values)
        except BaseException as exc:  # a result that cannot be sent (e.g. too deep): say so instead
            reply.update(ok=False, error={"type": "Unsendable", "message": describe(exc)["message"], "traceback": ""})
            wire.write_frame(fd_out, reply, None)
