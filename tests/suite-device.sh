#!/bin/sh
# suite-device.sh -- the behaviour suite on device (suite-gpu.sh).
exec sh "${top_srcdir:-.}/tests/suite-gpu.sh" device
