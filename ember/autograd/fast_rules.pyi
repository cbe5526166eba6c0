# Type stubs for ember.autograd.fast_rules (compiled): C versions of the hottest
# gradient rules, attached to the registered Python rules.
from ember.autograd.engine import Rule

RULES: dict[str, Rule]     # ember.autograd.registry's rules, by op name

def install() -> None: ...
