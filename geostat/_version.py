"""The version of geostat and the name it is installed by (``pip install geostat-tlr``;
the import packages are ``geostat`` and ``tlrcore``). The build reads the version here."""

__version__ = "0.2.0"
#: The distribution name on the package index (``geostat`` there is another project).
DISTRIBUTION = "geostat-tlr"
