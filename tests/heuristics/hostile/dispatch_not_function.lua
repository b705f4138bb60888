-- expect: no dispatch function
dispatch = 42
