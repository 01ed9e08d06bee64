"""What `gradviz check` prints, read as a person reads it: short lines for big models, statements as the code writes
them (no trailing comment), state named as the code names it."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from .conftest import write

LORA = textwrap.dedent("""\
    import torch
    from torch import nn


    class LoraLinear(nn.Module):
        def __init__(self, size, rank=2):
            super().__init__()
            self.base = nn.Linear(size, size)
            self.base.requires_grad_(False)
            self.lora_A = nn.Parameter(torch.randn(rank, size) * 0.01)
            self.lora_B = nn.Parameter(torch.zeros(size, rank))

        def forward(self, x):
            update = (x @ self.lora_A.T @ self.lora_B.T).detach()  # gradviz: ignore[cut_edge]
            return self.base(x) + update


    model = nn.Sequential(*[LoraLinear(8) for _ in range(12)], nn.Linear(8, 1))
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    for step in range(2):
        loss = model(torch.randn(4, 8)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
""")


def test_dead_lora_adapters_are_counted_by_module_and_listed_in_json(python_m_gradviz, tmp_path: Path) -> None:
    script = write(tmp_path, "lora.py", LORA)
    result = python_m_gradviz("check", script)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if "dead_parameter" in line)
    assert lines[head].endswith("lora.py:14  dead_parameter  (model.*: lora_A, lora_B for * in 0-11)")
    message = lines[head + 2]
    assert message.startswith("  24 parameters in 12 modules (`model.*: lora_A, lora_B` for * in 0-11) take part")
    # no parameter's full name in the text, no line of thousands of characters
    assert "model.3.lora_A" not in result.stdout and "model.3: lora_A" not in result.stdout
    assert max(len(line) for line in lines) < 400
    # the quoted source line as written, its comment too; the message quotes the statement alone
    assert lines[head + 1] == "     14 | update = (x @ self.lora_A.T @ self.lora_B.T).detach()  # gradviz: ignore[cut_edge]"
    assert "(`update = (x @ self.lora_A.T @ self.lora_B.T).detach()`)" in message and "#" not in message
    # the cut_edge the comment accepts stays quiet
    assert "cut_edge" not in result.stdout.replace("ignore[cut_edge]", "")

    found = json.loads(python_m_gradviz("check", script, "--json").stdout)["findings"]
    (dead,) = [f for f in found if f["kind"] == "dead_parameter"]
    assert dead["parameters"] == [f"model.{i}.{name}" for i in range(12) for name in ("lora_A", "lora_B")]
    assert dead["code"] == "update = (x @ self.lora_A.T @ self.lora_B.T).detach()  # gradviz: ignore[cut_edge]"


def test_a_few_modules_are_still_named_one_by_one(python_m_gradviz, tmp_path: Path) -> None:
    script = write(tmp_path, "lora3.py", LORA.replace("range(12)", "range(3)"))
    result = python_m_gradviz("check", script)
    assert "(model.0: lora_A, lora_B; model.1: lora_A, lora_B; model.2: lora_A, lora_B)" in result.stdout
    assert "  6 parameters (`model.0: lora_A, lora_B`; `model.1: lora_A, lora_B`; `model.2: lora_A, lora_B`) take part" in result.stdout


def test_a_cut_of_an_expression_is_quoted_with_its_parentheses(python_m_gradviz, tmp_path: Path) -> None:
    script = write(tmp_path, "lora.py", LORA.replace("  # gradviz: ignore[cut_edge]", ""))
    result = python_m_gradviz("check", script)
    assert "`(x @ self.lora_A.T @ self.lora_B.T).detach()` at line 14 cuts the gradient path" in result.stdout
    assert "`x @ self.lora_A.T @ self.lora_B.T.detach()`" not in result.stdout  # another program: B alone detached


def test_state_kept_in_an_attribute_is_named_as_the_code_names_it(python_m_gradviz, tmp_path: Path) -> None:
    script = write(tmp_path, "memory.py", textwrap.dedent("""\
        import torch
        from torch import nn


        class Memory(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(10, 10)
                self.mem = torch.zeros(8, 10)

            def forward(self, x):
                self.mem = torch.tanh(self.fc(x) + self.mem)  # carried to the next call
                return self.mem.sum()


        model = Memory()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            loss = model(torch.randn(8, 10))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """))
    result = python_m_gradviz("check", script)
    assert result.returncode == 1  # the program's own error: backward through the freed graph
    assert "memory.py:12  backward_through_freed_graph" in result.stdout
    assert ("  `self.mem` (output of TanhBackward0) still carries the graph that the backward at line 21 freed, and "
            "`self.mem = torch.tanh(self.fc(x) + self.mem)` at line 12 builds the new graph on it.") in result.stdout
    assert "(`self.mem = self.mem.detach()`, truncated backpropagation through time)" in result.stdout
    assert "tensor made at line" not in result.stdout
