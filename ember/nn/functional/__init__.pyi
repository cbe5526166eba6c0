# Type stub for ember.nn.functional: __init__.py binds every name in its submodules'
# __all__ in a loop, which type checkers cannot follow; this says the same statically.
from ember.nn.functional.activation import *
from ember.nn.functional.attention import *
from ember.nn.functional.conv import *
from ember.nn.functional.distance import *
from ember.nn.functional.dropout import *
from ember.nn.functional.fold import *
from ember.nn.functional.linear import *
from ember.nn.functional.loss import *
from ember.nn.functional.normalization import *
from ember.nn.functional.padding import *
from ember.nn.functional.pooling import *
from ember.nn.functional.softmax import *
from ember.nn.functional.sparse import *
from ember.nn.functional.upsampling import *
