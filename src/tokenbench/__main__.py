from tokenbench.cli import app

app()
