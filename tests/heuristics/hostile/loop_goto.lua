-- expect: instruction budget
::again:: goto again
