"""The relaxer (wait or go): its pure half (``relax_plan``) and its driver (``relax``)."""
