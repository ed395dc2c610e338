"""What both parts of `generate.py` share: the library versions recorded with every value, and writers that put
no timestamp or absolute path in a file (so that a re-run reproduces it byte for byte)."""

import importlib.metadata
import json
import math
import os

HERE = os.path.dirname(os.path.abspath(__file__))

LIBS = ['numpy', 'scipy', 'pandas', 'mt-metrics-eval', 'pingouin', 'irrCAC',
        'crowd-kit', 'krippendorff', 'scikit-learn']


def versions():
  out = {}
  for lib in LIBS:
    try:
      out[lib] = importlib.metadata.version(lib)
    except importlib.metadata.PackageNotFoundError:
      out[lib] = None
  return out


def fl(x):
  """Plain Python float (None for NaN) for JSON output."""
  if x is None:
    return None
  x = float(x)
  return None if math.isnan(x) else x


def write_json(path, obj):
  with open(path, 'w', encoding='utf-8', newline='\n') as f:
    json.dump(obj, f, indent=1, sort_keys=False, allow_nan=False)
    f.write('\n')


def write_csv(path, df):
  df.to_csv(path, index=False, lineterminator='\n')
