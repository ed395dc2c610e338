"""Label Studio's URL configuration, read from the installed server (every route it has, UI pages included), for
the gateway's route test. Run as a script in a subprocess: it sets Django up with Label Studio's settings."""

import json
import os
import sys

if __name__ == "__main__":
    import label_studio

    sys.path.insert(0, os.path.dirname(label_studio.__file__))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "core.settings.label_studio")
    import warnings

    warnings.simplefilter("ignore")
    import django

    django.setup()
    from django.urls import get_resolver

    def walk(resolver, prefix=""):
        for pattern in resolver.url_patterns:
            if hasattr(pattern, "url_patterns"):
                yield from walk(pattern, prefix + str(pattern.pattern))
            else:
                yield prefix + str(pattern.pattern)

    print(json.dumps(sorted(set(walk(get_resolver())))))
