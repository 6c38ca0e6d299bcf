#!/bin/sh
# suite-fake-hip.sh -- the behaviour suite on fake-hip (suite-gpu.sh).
exec sh "${top_srcdir:-.}/tests/suite-gpu.sh" fake-hip
