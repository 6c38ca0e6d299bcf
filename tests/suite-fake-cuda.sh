#!/bin/sh
# suite-fake-cuda.sh -- the behaviour suite on fake-cuda (suite-gpu.sh).
exec sh "${top_srcdir:-.}/tests/suite-gpu.sh" fake-cuda
