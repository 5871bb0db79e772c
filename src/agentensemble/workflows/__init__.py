"""Workflow executors."""
