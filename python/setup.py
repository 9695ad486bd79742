"""setup.py - the wgml Python package (pure Python over libwgml.so through ctypes).

    pip install ./python            # in a virtual environment (python3 -m venv --system-site-packages)
    pip install --user --break-system-packages ./python   # Debian's python3 without a venv (PEP 668)

Offline, with Debian's python3-setuptools, python3-wheel and python3-numpy (scripts/setup.sh installs
them): without a pyproject.toml pip builds with the setuptools already installed, downloading nothing.
The package finds libwgml.so itself (docs/python.md): $WGML_LIBRARY, beside the package (copy the
library into python/wgml/ before installing to ship it inside), the source tree's build/, the
system's library path.
"""
import os

from setuptools import setup

here = os.path.dirname(os.path.abspath(__file__))
# a libwgml.so copied into python/wgml/ is installed with the package
libs = [f for f in os.listdir(os.path.join(here, "wgml")) if f.startswith("libwgml.so")]

setup(
    name="wgml",
    version="0.1.0",
    description="Python bindings of wgml, a portable GPU/CPU inference engine (LLMs, embeddings, TTS, ASR, vision)",
    long_description=open(os.path.join(here, "README.md"), encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="MIT",
    packages=["wgml"],
    package_data={"wgml": ["py.typed"] + libs},
    python_requires=">=3.8",
    install_requires=["numpy"],
    zip_safe=False,
)
