"""No function of the submit filter's Lua is above complexity 25 (ARCHITECTURE.md "Short functions"), counted
by tests/lua_complexity.py, which counts every function (lizard's Lua reader misses the largest)."""

from __future__ import annotations

from pathlib import Path

from lua_complexity import functions

FILTER = Path(__file__).resolve().parents[1] / "job_submit"
LIMIT = 25


def test_no_filter_function_is_above_the_limit() -> None:
    over = []
    counted = 0
    for path in sorted([*FILTER.glob("slurm_topo_filter/*.lua"), FILTER / "job_submit.lua"]):
        for f in functions(path.read_text()):
            counted += 1
            if f.complexity > LIMIT:
                over.append(f"{path.name}:{f.line} {f.name} {f.complexity}")
    assert counted > 100
    assert over == []


def test_the_counter_counts_what_it_should() -> None:
    """Each kind of branch, nested functions apart, keywords in strings and comments ignored, elseif inside
    one if block, a repeat loop, anonymous functions."""
    source = """
local function a(x)                 -- 1
  if x and x > 1 or x < -1 then     -- if, and, or: 4
    return "if and or while"        -- a string: nothing
  elseif x == 0 then                -- 5
    for i = 1, 2 do end             -- 6
  end
  --[[ if while for ]]
  local g = function(y)             -- a function of its own
    while y do y = nil end          -- g: 2
  end
  repeat x = x - 1 until x < 0      -- 7
  return [==[ and or ]==]
end
function M.b() return 1 end
"""
    found = {f.name: f.complexity for f in functions(source)}
    assert found == {"a": 7, "g": 2, "M.b": 1}
