#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Build step: a JSON config as a C string (netchanneld's embedded default config)."""
import json
import sys

text = open(sys.argv[1]).read()
json.loads(text)  # a broken default config fails the build, not the daemon
with open(sys.argv[2], "w") as f:
    f.write(f"/* Generated from {sys.argv[1].rsplit('/', 1)[-1]} by scripts/embed_config.py. */\n")
    f.write(f"static const char ncd_default_config[] = {json.dumps(text)};\n")
